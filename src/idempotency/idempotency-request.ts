import { createHash } from 'node:crypto';
import { AppError } from '../common/errors/app-error';

const MAX_KEY_LENGTH = 255;
/** Printable ASCII: space (0x20) to tilde (0x7E). */
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/** The header's value, checked: 1..255 printable ASCII characters, else 400 validation_failed. */
export function parseIdempotencyKey(value: string | string[]): string {
  // Node joins repeated headers with ", ": a key sent twice is checked as the joined text.
  const key = Array.isArray(value) ? value.join(', ') : value;
  if (key.length === 0 || key.length > MAX_KEY_LENGTH || !PRINTABLE_ASCII.test(key)) {
    throw AppError.validation(
      [
        {
          field: 'Idempotency-Key',
          problem: `must be 1 to ${MAX_KEY_LENGTH} printable ASCII characters`,
        },
      ],
      'The Idempotency-Key header is not valid',
    );
  }
  return key;
}

/**
 * What "the same request" means: the method, the path with its query, and the body as JSON with
 * its object keys sorted, so a client that serialises the same object in another key order is
 * still sending the same request. An absent body counts as `{}` (bodiless endpoints). The body
 * has already passed the JSON body middleware's depth limit, so the walk is bounded.
 */
export function requestFingerprint(method: string, url: string, body: unknown): Buffer {
  return createHash('sha256')
    .update(method)
    .update('\n')
    .update(url)
    .update('\n')
    .update(canonicalJson(body ?? {}))
    .digest();
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
