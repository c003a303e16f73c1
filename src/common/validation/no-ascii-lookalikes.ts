import { ValidateBy } from 'class-validator';

/**
 * A character outside ASCII whose lower case holds an ASCII one: U+212A KELVIN SIGN lowers to
 * `k`, U+0130 to `i` (and a combining dot). Addresses are unique by `lower(email)`, so
 * `\u212Aate@corp.com` would take kate@corp.com, and its mails (a reset's included) would go to
 * an address no one reads.
 */
export function foldsIntoAscii(text: string): boolean {
  for (const character of text) {
    // eslint-disable-next-line no-control-regex -- the ASCII range is the point
    if (character > '\u007f' && /[\u0000-\u007f]/.test(character.toLowerCase())) return true;
  }
  return false;
}

/** An address holding a character that lower-cases into ASCII (foldsIntoAscii) is refused. */
export const NoAsciiLookalikes = () =>
  ValidateBy({
    name: 'noAsciiLookalikes',
    validator: {
      validate: (value) => typeof value === 'string' && !foldsIntoAscii(value),
      defaultMessage: () =>
        '$property must not hold a character whose lower case is an ASCII letter (such as U+212A KELVIN SIGN)',
    },
  });
