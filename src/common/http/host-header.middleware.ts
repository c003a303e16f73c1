import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error';

/**
 * Refuses an HTTP/1.1 request without a Host header (RFC 9112 §3.2: a server must answer 400),
 * with the envelope and request id every answer has; Node's own refusal was a bare status line
 * (found by review). HTTP/1.0 requests may leave it out.
 */
export function hostHeaderMiddleware(
  request: Request,
  _response: Response,
  next: NextFunction,
): void {
  if (request.headers.host !== undefined || request.httpVersion !== '1.1') return next();
  next(AppError.validation([{ field: 'host', problem: 'must be sent (HTTP/1.1)' }]));
}
