import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import { AppError } from '../errors/app-error';

/** The request header of contract §16 and the answer header of a replay. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

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
 * The request's `Idempotency-Key` header, checked by the rule above, for a handler that passes it
 * on (billing hands Stripe a digest of it). The global pipe leaves headers alone.
 */
export const IdempotencyKey = createParamDecorator(
  (_data: unknown, context: ExecutionContext): string | undefined => {
    const value = context.switchToHttp().getRequest<IncomingMessage>().headers[
      IDEMPOTENCY_KEY_HEADER
    ];
    return value === undefined ? undefined : parseIdempotencyKey(value);
  },
);
