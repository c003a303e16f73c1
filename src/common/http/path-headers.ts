import type { NextFunction, Request, RequestHandler, Response } from 'express';

/**
 * A middleware setting `headers` on every response to a path `path` matches, before anything
 * answers it: files, 304s, a 404, a 429 of the rate limiter, the 400 of a malformed address and
 * another method's answer alike. Installed ahead of the app's own middleware (app.setup.ts), for
 * the pages a browser shows (the console, the API's documentation).
 */
export function headersOnPaths(
  path: RegExp,
  headers: Readonly<Record<string, string>>,
): RequestHandler {
  const entries = Object.entries(headers);
  return (request: Request, response: Response, next: NextFunction) => {
    if (path.test(request.path)) {
      for (const [name, value] of entries) response.setHeader(name, value);
    }
    next();
  };
}

/**
 * What every page of this origin sends besides its Content-Security-Policy: no referrer, no
 * sniffing, no framing (for browsers before frame-ancestors), its own browsing context group.
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
};
