import { createHash } from 'node:crypto';
import { AppError } from '../common/errors/app-error';

export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

const MAX_KEY_LENGTH = 255;
/** Printable ASCII: space (0x20) to tilde (0x7E). */
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/** Stripe's webhooks carry their own event ids; §16 leaves them out. */
const EXCLUDED_PATHS = new Set(['/v1/billing/webhooks']);

/** Every POST under /v1 except the Stripe webhook receiver (contract §16). */
export function acceptsIdempotencyKey(method: string, path: string): boolean {
  return method === 'POST' && path.startsWith('/v1/') && !EXCLUDED_PATHS.has(stripSlash(path));
}

function stripSlash(path: string): string {
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}

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
