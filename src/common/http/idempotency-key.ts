/** The request header of contract §16 and the answer header of a replay. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

/** Stripe's webhooks carry their own event ids; §16 leaves them out. */
const EXCLUDED_PATHS = new Set(['/v1/billing/webhooks']);

/**
 * Every POST under /v1 except the Stripe webhook receiver accepts an `Idempotency-Key` (contract
 * §16). Defined here, below every feature, because both the idempotency module and the OpenAPI
 * document need it; `path` is a request path or a route template.
 */
export function acceptsIdempotencyKey(method: string, path: string): boolean {
  return (
    method.toUpperCase() === 'POST' &&
    path.startsWith('/v1/') &&
    !EXCLUDED_PATHS.has(stripSlash(path))
  );
}

function stripSlash(path: string): string {
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}
