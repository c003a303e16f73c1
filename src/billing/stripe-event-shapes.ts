import type Stripe from 'stripe';

/*
 * A signed Stripe event is Stripe's, but its payload is still JSON we did not write: an API
 * version we do not pin, a test event sent by hand from the dashboard, a field Stripe leaves out.
 * These say whether it holds what the service reads, before anything reads it (found by review:
 * a signed `customer.subscription.updated` whose object was `{}` answered 500, and Stripe retries
 * a 5xx for days).
 */

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const isId = (value: unknown): value is string => typeof value === 'string' && value.length > 0;

/** A Stripe expandable field: an id, or the object holding it. */
const isIdOrObjectWithId = (value: unknown): boolean =>
  isId(value) || (isRecord(value) && isId(value.id));

/** The last second a timestamp column and a JavaScript Date both hold: 9999-12-31T23:59:59Z. */
const LAST_UNIX_SECOND = 253_402_300_799;

/** Seconds since 1970 that name a time (a larger integer made an Invalid Date, and a 500). */
const isUnixTime = (value: unknown): boolean =>
  Number.isSafeInteger(value) && (value as number) > 0 && (value as number) <= LAST_UNIX_SECOND;

const isOptional = (value: unknown, check: (value: unknown) => boolean): boolean =>
  value === undefined || value === null || check(value);

/** What every event carries and the service reads: its id, its time and its object. */
export function isEventEnvelope(event: unknown): event is Stripe.Event {
  return (
    isRecord(event) &&
    isId(event.id) &&
    typeof event.type === 'string' &&
    isUnixTime(event.created) &&
    isRecord(event.data) &&
    isRecord(event.data.object)
  );
}

/** What snapshotOf reads of a subscription, each with the type it is written with. */
export function isSubscriptionPayload(object: unknown): object is Stripe.Subscription {
  if (!isRecord(object) || !isId(object.id) || typeof object.status !== 'string') return false;
  if (!isIdOrObjectWithId(object.customer)) return false;
  if (!isOptional(object.cancel_at_period_end, (value) => typeof value === 'boolean')) return false;
  if (!isOptional(object.items, isRecord)) return false;
  const items = (object.items as Record<string, unknown> | null | undefined)?.data;
  if (!isOptional(items, Array.isArray)) return false;
  const item: unknown = (items as unknown[] | null | undefined)?.[0];
  if (item === undefined) return true;
  return (
    isRecord(item) &&
    isOptional(item.price, (price) => isRecord(price) && isOptional(price.id, isId)) &&
    isOptional(item.current_period_end, isUnixTime)
  );
}

/** What onInvoice reads of an invoice: its id (the rest is optional, and read with care). */
export function isInvoicePayload(object: unknown): object is Stripe.Invoice {
  return isRecord(object) && isId(object.id);
}
