import { headersOnPaths, PAGE_HEADERS } from '../http/path-headers';
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
  ...PAGE_HEADERS,
};

/** Every response of OPENAPI_UI_PATH and the files under it. */
export const docsHeaders = headersOnPaths(
  new RegExp(`^${OPENAPI_UI_PATH}(/|$)`, 'i'),
  DOCS_HEADERS,
);
