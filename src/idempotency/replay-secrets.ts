/**
 * The routes whose answer shows a secret once, and its fields: a replay answers them `null`
 * (contract §16), and the stored copy never holds them, so no secret rests in
 * `idempotency_keys`. Keyed by method and Express route template (what `request.route.path`
 * says). A new route that shows a secret once adds its line here; the e2e spec proves the API
 * key routes.
 */
const SECRET_FIELDS_BY_ROUTE: ReadonlyMap<string, readonly string[]> = new Map([
  ['POST /v1/api-keys', ['key']],
  ['POST /v1/api-keys/:id/roll', ['key']],
  ['POST /v1/webhook-endpoints', ['secret']],
]);

export function secretFieldsOf(
  method: string,
  routeTemplate: string | undefined,
): readonly string[] {
  if (!routeTemplate) return [];
  return SECRET_FIELDS_BY_ROUTE.get(`${method} ${routeTemplate}`) ?? [];
}

/** The body to store: a copy with the secret fields (top level, where the API puts them) null. */
export function withoutSecrets(body: unknown, fields: readonly string[]): unknown {
  if (fields.length === 0 || body === null || typeof body !== 'object' || Array.isArray(body)) {
    return body;
  }
  const copy: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  for (const field of fields) if (field in copy) copy[field] = null;
  return copy;
}

/**
 * Routes that are idempotent themselves, where a stored answer would be wrong: the interceptor
 * checks the header and leaves the rest to the route.
 * - `POST /v1/billing/payment-methods` sends the key to Stripe, which answers a retry with the
 *   same SetupIntent and its `client_secret`; storing that answer here would break
 *   docs/billing.md's promise that the `client_secret` is never stored, and nulling it would
 *   leave a retrying client unable to complete the SetupIntent.
 * - `POST /v1/auth/logout` ends the token it is sent with, which a user's key does not name: the
 *   same key sent with a second token replayed the first 204 and ended nothing (found by review).
 *   Ending a token twice changes nothing.
 */
const KEYED_BY_THE_ROUTE: ReadonlySet<string> = new Set([
  'POST /v1/billing/payment-methods',
  'POST /v1/auth/logout',
]);

export function isKeyedByTheRoute(method: string, routeTemplate: string | undefined): boolean {
  return routeTemplate !== undefined && KEYED_BY_THE_ROUTE.has(`${method} ${routeTemplate}`);
}
