import type { IncomingMessage } from 'node:http';
import { newUlid } from '../crypto/ulid';

export function newRequestId(): string {
  return newUlid();
}

export const REQUEST_ID_HEADER = 'X-Request-Id';

/** The id given to the request by the logging middleware, the single source of truth. */
export function requestIdOf(request: IncomingMessage): string {
  const id = (request as IncomingMessage & { id?: unknown }).id;
  return typeof id === 'string' ? id : '';
}
