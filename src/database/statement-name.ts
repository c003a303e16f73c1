import { createHash } from 'node:crypto';

/** Names already derived, by statement text: prepared statements are few and hot. */
const names = new Map<string, string>();

/**
 * The prepared-statement name of a statement's text: a hash of the text, so a name can never
 * stand for two texts (PostgreSQL refuses a second text under a name it prepared) and no caller
 * writes one. 34 bytes, within PostgreSQL's 63-byte identifier limit.
 */
export function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `s_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
    names.set(text, name);
  }
  return name;
}
