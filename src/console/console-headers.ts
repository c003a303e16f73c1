import type { NextFunction, Request, Response } from 'express';

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
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  // frame-ancestors, for browsers that predate it.
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
};

/** `/console` and the paths under it, as Express's case-insensitive routing matches them. */
const CONSOLE_PATH = /^\/console(\/|$)/i;

/**
 * Sets the console's security headers on every /console request before anything answers, so
 * that every response has them: files, 304s, a 404, a 429 of the rate limiter, the 400 of a
 * malformed address and another method's answer alike. Installed ahead of the app's own
 * middleware (app.setup.ts), not on the console's routes only (found by review).
 */
export function consoleHeaders(request: Request, response: Response, next: NextFunction): void {
  if (CONSOLE_PATH.test(request.path)) {
    for (const [name, value] of Object.entries(CONSOLE_HEADERS)) response.setHeader(name, value);
  }
  next();
}
