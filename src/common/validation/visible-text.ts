import { ValidateBy } from 'class-validator';

/**
 * Characters that show nothing: white space, format and other default-ignorable characters
 * (U+200B ZERO WIDTH SPACE, U+3164 HANGUL FILLER), and U+2800 BRAILLE PATTERN BLANK, which is a
 * symbol to Unicode but draws as a space.
 */
const SHOWS_NOTHING = /[\p{White_Space}\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}\u2800]/u;

/** Whether `text` holds at least one character that shows something. */
export function hasVisibleText(text: string): boolean {
  for (const character of text) {
    if (!SHOWS_NOTHING.test(character)) return true;
  }
  return false;
}

/**
 * A name others read (an organization's in an invitation mail, a personality's, a key's or a
 * document's in the console) must show something: one made of spaces or invisible characters
 * lists as a blank row no one can tell apart from another (found by review).
 */
export const HasVisibleText = () =>
  ValidateBy({
    name: 'hasVisibleText',
    validator: {
      // An empty one is MinLength's to refuse: one problem, not two.
      validate: (value) => typeof value === 'string' && (value === '' || hasVisibleText(value)),
      defaultMessage: () =>
        '$property must hold a visible character, not only spaces or invisible ones',
    },
  });
