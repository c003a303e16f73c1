import { ValidateBy } from 'class-validator';

/**
 * Whether an address holds characters that stand for others where addresses meet: they are
 * unique by `lower(email)`, and mail systems normalize. Two kinds:
 * - a character outside ASCII whose lower case holds an ASCII one: U+212A KELVIN SIGN lowers to
 *   `k`, U+0130 to `i` and a combining dot;
 * - text that Unicode's compatibility normalization (NFKC) rewrites: U+212B ANGSTROM SIGN becomes
 *   Å (which lowers to å), U+2126 OHM SIGN Ω, a fullwidth letter its plain one, a letter and a
 *   combining accent the accented letter.
 * `\u212Aate@corp.com` would take kate@corp.com, `\u212Bsa@corp.test` åsa@corp.test, and their
 * mails (a reset's included) would go to the lookalike spelling (found by review).
 */
export function standsForAnother(text: string): boolean {
  if (text.normalize('NFKC') !== text) return true;
  for (const character of text) {
    // eslint-disable-next-line no-control-regex -- the ASCII range is the point
    if (character > '\u007f' && /[\u0000-\u007f]/.test(character.toLowerCase())) return true;
  }
  return false;
}

/** An address holding characters that stand for others (standsForAnother) is refused. */
export const NoLookalikes = () =>
  ValidateBy({
    name: 'noLookalikes',
    validator: {
      validate: (value) => typeof value === 'string' && !standsForAnother(value),
      defaultMessage: () =>
        '$property must be in Unicode normal form NFKC and hold no character whose lower case is an ASCII letter (such as U+212A KELVIN SIGN or U+212B ANGSTROM SIGN)',
    },
  });
