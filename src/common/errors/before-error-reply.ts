import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AppError } from './app-error';

/**
 * An optional provider the exception filter awaits before writing any error response. It exists
 * for requests no guard saw (unknown routes, bodies refused by the parser): the rate limiter
 * charges them to the client's bucket and adds its headers, and may answer 429 instead by
 * returning that error. Provided by the rate-limit module; common/ imports no feature.
 */
export const BEFORE_ERROR_REPLY = Symbol('BEFORE_ERROR_REPLY');

export type BeforeErrorReply = (
  request: IncomingMessage,
  response: ServerResponse,
) => Promise<AppError | null>;
