import type { NextFunction, Request, Response } from 'express';

/**
 * `Cache-Control: no-store` on every answer to a request that carries credentials (an API key or
 * an access token): memories, facts, exports, members and audit events are personal data, and a
 * browser client of the API other than the console (which fetches with `cache: 'no-store'`) kept
 * them in its disk cache (found by review). Set before anything answers, so errors carry it too;
 * a handler that sets its own (a stream's `no-cache`, a static read's) replaces it. Public reads
 * without credentials keep their own caching (static-json.ts).
 */
export function privateResponsesMiddleware(
  request: Request,
  response: Response,
  next: NextFunction,
): void {
  if (request.headers.authorization !== undefined) response.setHeader('Cache-Control', 'no-store');
  next();
}
