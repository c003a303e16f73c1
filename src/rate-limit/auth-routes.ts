/**
 * The routes whose callers draw from the stricter per-IP auth bucket (RATE_LIMIT_AUTH_*), so the
 * login lockout cannot be used to lock out many accounts quickly from one address, nor reset
 * tokens be guessed. Matched by method and path rather than by a decorator: the identity module
 * gets the bucket for these routes without importing anything, and the rule also holds for
 * requests that never reach a controller (bad bodies, a route not deployed yet).
 * Sign-up is listed too (contract §14): each one hashes a password with argon2 and creates an
 * organization, the costliest thing an anonymous caller can ask for.
 */
export const AUTH_RATE_LIMITED_ROUTES: ReadonlyArray<{ method: string; path: string }> = [
  { method: 'POST', path: '/v1/auth/signup' },
  { method: 'POST', path: '/v1/auth/login' },
  // A login too, by an identity provider's token (found by review: it drew from the IP bucket).
  { method: 'POST', path: '/v1/auth/sso/login' },
  { method: 'POST', path: '/v1/auth/forgot-password' },
  { method: 'POST', path: '/v1/auth/reset-password' },
  // A mail per request (to the caller's own address), and tokens to guess.
  { method: 'POST', path: '/v1/auth/resend-verification' },
  { method: 'POST', path: '/v1/auth/verify-email' },
];

const KEYS = new Set(AUTH_RATE_LIMITED_ROUTES.map(({ method, path }) => `${method} ${path}`));
const METHODS = new Set(AUTH_RATE_LIMITED_ROUTES.map(({ method }) => method));

/**
 * Express matches routes case-insensitively and with an optional trailing slash, so the rule
 * does too: `/V1/Auth/Login/` reaches the login handler and must not escape the auth bucket.
 */
export function isAuthRateLimited(method: string, path: string): boolean {
  const upper = method.toUpperCase();
  // Most requests are GETs: refused before the path is normalized (on every request).
  if (!METHODS.has(upper)) return false;
  const normalized = path.toLowerCase().replace(/\/+$/, '');
  return KEYS.has(`${upper} ${normalized}`);
}
