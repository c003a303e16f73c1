import { applyDecorators } from '@nestjs/common';
import { IsEmail, ValidateBy } from 'class-validator';
import { UNSEEN_CHARACTERS } from '../text/unseen-characters';
import { NoLookalikes } from './no-lookalikes';

/**
 * What a local part of a new address may hold: letters, digits and combining marks of any
 * script, and the ASCII symbols RFC 5322 allows unquoted. Not spaces, punctuation or symbols
 * outside ASCII (U+2800 BRAILLE PATTERN BLANK reads as a space, U+A789 as a colon), nor format
 * and invisible characters (a right-to-left override reorders the sentence around the address,
 * U+200B hides inside `bob@`).
 */
const LOCAL_PART = /^[\p{L}\p{N}\p{M}!#$%&'*+\-/=?^_`{|}~.]+$/u;
const INVISIBLE = new RegExp(`[${UNSEEN_CHARACTERS}]`, 'u');

/** The scripts told apart; a letter of any other counts as one more, "other". */
const SCRIPTS = [
  'Latin',
  'Cyrillic',
  'Greek',
  'Armenian',
  'Han',
  'Hiragana',
  'Katakana',
  'Hangul',
  'Bopomofo',
  'Arabic',
  'Hebrew',
].map((name) => [name, new RegExp(`\\p{Script=${name}}`, 'u')] as const);

/**
 * The mixes of scripts one part may hold (Unicode's "highly restrictive" level, UTS #39): Latin
 * with the scripts Japanese, Chinese and Korean are written in beside it.
 */
const ALLOWED_MIXES = [
  ['Latin', 'Han', 'Hiragana', 'Katakana'],
  ['Latin', 'Han', 'Bopomofo'],
  ['Latin', 'Han', 'Hangul'],
].map((mix) => new Set(mix));

/** Whether `part` (a local part, a domain label) holds letters of scripts that do not go together. */
export function mixesScripts(part: string): boolean {
  const scripts = new Set<string>();
  for (const character of part) {
    if (!/\p{L}/u.test(character)) continue;
    scripts.add(SCRIPTS.find(([, pattern]) => pattern.test(character))?.[0] ?? 'other');
  }
  if (scripts.size < 2) return false;
  return !ALLOWED_MIXES.some((mix) => [...scripts].every((script) => mix.has(script)));
}

/** Why `address`'s characters make it read as something else, or undefined. */
export function addressCharactersProblem(address: string): string | undefined {
  const at = address.lastIndexOf('@');
  const local = at < 0 ? address : address.slice(0, at);
  const domain = at < 0 ? '' : address.slice(at + 1);
  if (INVISIBLE.test(address)) return 'invisible or formatting character';
  if (!LOCAL_PART.test(local)) return 'space, punctuation or symbol outside ASCII before the @';
  if ([local, ...domain.split('.')].some(mixesScripts)) {
    return 'part mixing scripts (a Cyrillic а among Latin letters reads as a)';
  }
  return undefined;
}

/**
 * An address an account or an invitation is made for: an e-mail address whose local part is not
 * quoted and holds only letters, digits and RFC 5322's unquoted symbols, no part of which mixes
 * scripts (addressCharactersProblem), holding no lookalike (NoLookalikes). `аdmin@exаmple.com`
 * (two Cyrillic а) was taken beside admin@example.com, and the console showed the two members
 * alike (found by review). A quoted local part (`"a b"@corp.test`) may hold spaces and
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
