import type { NextFunction, Request, Response } from 'express';
import { OPENAPI_UI_PATH } from './setup-openapi';

/**
 * The Content-Security-Policy of the API's documentation (Swagger UI at /docs), which shares
 * the console's origin: its scripts and styles from this origin (Swagger UI writes inline
 * styles, and its icons are data: images), requests to this origin only (the document and "Try it
 * out"), no framing, so that a page elsewhere cannot frame it over a person's pasted token.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export const DOCS_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': DOCS_CSP,
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
};

/** OPENAPI_UI_PATH and the files under it, as Express's case-insensitive routing matches them. */
const DOCS_PATH = new RegExp(`^${OPENAPI_UI_PATH}(/|$)`, 'i');

/** Sets the documentation's headers on every /docs response, whichever middleware answers it. */
export function docsHeaders(request: Request, response: Response, next: NextFunction): void {
  if (DOCS_PATH.test(request.path)) {
    for (const [name, value] of Object.entries(DOCS_HEADERS)) response.setHeader(name, value);
  }
  next();
}
