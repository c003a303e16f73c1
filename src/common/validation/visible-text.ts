import { ValidateBy, type ValidationOptions } from 'class-validator';
import { UNSEEN_CHARACTERS } from '../text/unseen-characters';

/**
 * A character that draws something: not white space or a separator, a control character, a
 * combining mark alone, or one of the UNSEEN_CHARACTERS.
 */
const VISIBLE = new RegExp(`[^\\s\\p{Cc}\\p{Z}\\p{M}${UNSEEN_CHARACTERS}]`, 'u');

/** Whether `text` holds at least one character that shows something (a name, a message). */
export function hasVisibleText(text: string): boolean {
  return VISIBLE.test(text);
}

/**
 * A name others read (an organization's in an invitation mail, a personality's, a key's or a
 * document's in the console) must show something: one made of spaces or invisible characters
 * lists as a blank row no one can tell apart from another (found by review).
 */
export const HasVisibleText = (options?: ValidationOptions) =>
  ValidateBy(
    {
      name: 'hasVisibleText',
      validator: {
        // An empty one is MinLength's to refuse: one problem, not two.
        validate: (value) => typeof value === 'string' && (value === '' || hasVisibleText(value)),
        defaultMessage: () =>
          '$property must hold a visible character, not only spaces or invisible ones',
      },
    },
    options,
  );
