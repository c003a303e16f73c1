import { randomFillSync } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { ulid } from 'ulid';

const POOL_SIZE = 4096;
const pool = new Uint8Array(POOL_SIZE);
let offset = POOL_SIZE;

/**
 * A CSPRNG source for `ulid` that draws from a pooled buffer: the default source makes one
 * crypto call per character, which costs more than the rest of a small request.
 */
function pooledRandom(): number {
  if (offset >= POOL_SIZE) {
    randomFillSync(pool);
    offset = 0;
  }
  return pool[offset++] / 256;
}

export function newRequestId(): string {
  return ulid(undefined, pooledRandom);
}

export const REQUEST_ID_HEADER = 'X-Request-Id';

/** The id given to the request by the logging middleware, the single source of truth. */
export function requestIdOf(request: IncomingMessage): string {
  const id = (request as IncomingMessage & { id?: unknown }).id;
  return typeof id === 'string' ? id : '';
}
