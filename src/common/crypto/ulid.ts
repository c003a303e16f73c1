import { randomFillSync } from 'node:crypto';
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

/** A new ULID (time-ordered, 80 random bits), its randomness drawn from a pooled buffer. */
export function newUlid(): string {
  return ulid(undefined, pooledRandom);
}
