import { randomBytes } from 'node:crypto';
import { sha256 } from '../common/crypto/sha256';

/**
 * API keys look like `pk_<43 base62 chars of 256 random bits><6 base62 chars of CRC32>`.
 * The `pk_` prefix lets the guard tell keys from JWTs and lets secret scanners find leaked keys;
 * the checksum rejects typos and random guesses without a database round trip.
 */
export const API_KEY_PREFIX = 'pk_';
const BODY_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
const KEY_LENGTH = API_KEY_PREFIX.length + BODY_LENGTH + CHECKSUM_LENGTH;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = new RegExp(`^${API_KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH}}$`);
/** How many characters of a key are shown in lists. */
export const DISPLAY_PREFIX_LENGTH = API_KEY_PREFIX.length + 8;

function toBase62(value: bigint, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) {
    out = ALPHABET[Number(value % 62n)] + out;
    value /= 62n;
  }
  return out;
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(text: string): number {
  let crc = 0xffffffff;
  for (let i = 0; i < text.length; i++)
    crc = CRC_TABLE[(crc ^ text.charCodeAt(i)) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function checksumOf(body: string): string {
  return toBase62(BigInt(crc32(body)), CHECKSUM_LENGTH);
}

export function generateApiKey(): string {
  const body = toBase62(BigInt(`0x${randomBytes(32).toString('hex')}`), BODY_LENGTH);
  return `${API_KEY_PREFIX}${body}${checksumOf(body)}`;
}

export function looksLikeApiKey(credential: string): boolean {
  return credential.startsWith(API_KEY_PREFIX);
}

/** Shape and checksum only: a key that fails here cannot exist, so no lookup is made. */
export function isWellFormedApiKey(key: string): boolean {
  if (key.length !== KEY_LENGTH || !KEY_PATTERN.test(key)) return false;
  const body = key.slice(API_KEY_PREFIX.length, API_KEY_PREFIX.length + BODY_LENGTH);
  return key.slice(-CHECKSUM_LENGTH) === checksumOf(body);
}

export function hashApiKey(key: string): Buffer {
  return sha256(key);
}
