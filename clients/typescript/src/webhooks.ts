import { Webhook } from 'standardwebhooks';
import type { components } from './generated/openapi';

export { WebhookVerificationError } from 'standardwebhooks';

/**
 * The body of a webhook request (docs/webhooks.md): `{id, type, created_at, organization_id,
 * data}`, a union told apart by `type`, so `if (event.type === 'end_user.deleted')` types
 * `event.data`. `data` never holds a secret.
 */
export type WebhookEvent = components['schemas']['WebhookEventDto'];

/** The types of event a webhook endpoint receives (`ping` from `POST …/{id}/test`). */
export type WebhookEventType = WebhookEvent['type'];

/** A request's headers: a fetch `Headers`, or Node's `IncomingHttpHeaders`-like record. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

const SIGNED_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;

/**
 * Checks a webhook request as the Standard Webhooks specification says (signature over
 * `{webhook-id}.{webhook-timestamp}.{body}` with the endpoint's `whsec_…` secret, timestamp within
 * five minutes) and answers its event; throws WebhookVerificationError otherwise. `payload` is the
 * raw body as received: parsed and re-serialized JSON no longer matches its signature.
 */
export function verifyWebhook(
  payload: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string,
): WebhookEvent {
  const body = typeof payload === 'string' ? payload : new TextDecoder().decode(payload);
  const signed: Record<string, string> = {};
  for (const name of SIGNED_HEADERS) {
    const value = headerValue(headers, name);
    if (value !== undefined) signed[name] = value;
  }
  return new Webhook(secret).verify(body, signed) as WebhookEvent;
}

function headerValue(headers: WebhookHeaders, name: string): string | undefined {
  if (isHeaders(headers)) return headers.get(name) ?? undefined;
  const entry = Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
  return Array.isArray(entry) ? entry[0] : entry;
}

/** Any fetch Headers (a framework's own class included), not only this realm's. */
function isHeaders(headers: WebhookHeaders): headers is Headers {
  return typeof headers.get === 'function';
}
