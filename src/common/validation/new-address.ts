import { applyDecorators } from '@nestjs/common';
import { IsEmail, ValidateBy } from 'class-validator';
import { NoLookalikes } from './no-lookalikes';

/**
 * What a local part of a new address may hold: letters, digits and combining marks of any
 * script, and the ASCII symbols RFC 5322 allows unquoted. Not spaces, punctuation or symbols
 * outside ASCII (U+2800 BRAILLE PATTERN BLANK reads as a space, U+A789 as a colon), nor format
 * and invisible characters (a right-to-left override reorders the sentence around the address,
 * U+200B hides inside `bob@`).
 */
const LOCAL_PART = /^[\p{L}\p{N}\p{M}!#$%&'*+\-/=?^_`{|}~.]+$/u;
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\p{Cf}]/u;

/** Why `address`'s characters make it read as something else, or undefined. */
export function addressCharactersProblem(address: string): string | undefined {
  const at = address.lastIndexOf('@');
  const local = at < 0 ? address : address.slice(0, at);
  if (INVISIBLE.test(address)) return 'invisible or formatting character';
  if (!LOCAL_PART.test(local)) return 'space, punctuation or symbol outside ASCII before the @';
  return undefined;
}

/**
 * An address an account or an invitation is made for: an e-mail address whose local part is not
 * quoted and holds only letters, digits and RFC 5322's unquoted symbols (addressCharactersProblem),
 * holding no lookalike (NoLookalikes). A quoted local part (`"a b"@corp.test`) may hold spaces and
 * punctuation, so an inviter's address read as the service's own words in the mail that names it,
 * and `"bob"@corp.test` made a second account for bob@corp.test's mailbox (found by review; then,
 * by a second, the same sentence written with U+2800 for spaces). Signing in and asking for a
 * reset still take any address: an account made before keeps working.
 */
export const IsNewAddress = () =>
  applyDecorators(
    IsEmail(
      { blacklisted_chars: '"' },
      { message: 'email must be an e-mail address whose local part is not quoted' },
    ),
    ValidateBy({
      name: 'plainAddress',
      validator: {
        validate: (value) => typeof value === 'string' && !addressCharactersProblem(value),
        defaultMessage: (args) =>
          `email must hold no ${addressCharactersProblem(String(args?.value)) ?? 'such character'}`,
      },
    }),
    NoLookalikes(),
  );
