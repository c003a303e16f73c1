import { createHash } from 'node:crypto';

/** SHA-256 of a secret (API key, reset token, access token): what is stored or cached instead of it. */
export function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
