import { headersOnPaths, PAGE_HEADERS } from '../common/http/path-headers';

/**
 * The Content-Security-Policy of every console response: scripts, styles, images and fonts from
 * this origin's files only (no inline script or style, no eval), requests to this origin only
 * (the public API), no plugin, no base tag, no framing.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': CONSOLE_CSP,
  // Links from the console (and the token of a mail link in its address) name nothing elsewhere.
  ...PAGE_HEADERS,
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
};

/**
 * Every /console response carries them (found by review: set on the console's routes only, a
 * 404 or a 429 went without), `/console` and the paths under it as Express's case-insensitive
 * routing matches them.
 */
export const consoleHeaders = headersOnPaths(/^\/console(\/|$)/i, CONSOLE_HEADERS);
