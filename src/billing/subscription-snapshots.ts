import type Stripe from 'stripe';
import { isEnded, type SubscriptionStatus } from './entities/billing-subscription.entity';

/** What we keep of a Stripe subscription. */
export interface SubscriptionSnapshot {
  stripeSubscriptionId: string;
  stripeCustomerId: string;
  priceId: string | null;
  status: SubscriptionStatus;
  stripeStatus: string;
  collectionPaused: boolean;
  cancelAtPeriodEnd: boolean;
  currentPeriodEnd: Date | null;
}

/** Where Stripe API versions before 2025-03-31 (basil) put the period end (docs/billing.md). */
type BeforeBasilSubscription = { current_period_end?: number | null };

export function snapshotOf(subscription: Stripe.Subscription): SubscriptionSnapshot {
  const item = subscription.items?.data?.[0];
  const periodEnd =
    item?.current_period_end ??
    (subscription as Stripe.Subscription & BeforeBasilSubscription).current_period_end;
  const paused = subscription.pause_collection != null;
  const status = (
    paused && !isEnded(subscription.status) ? 'suspended' : subscription.status
  ) as SubscriptionStatus;
  return {
    stripeSubscriptionId: subscription.id,
    stripeCustomerId:
      typeof subscription.customer === 'string' ? subscription.customer : subscription.customer.id,
    priceId: item?.price?.id ?? null,
    status,
    stripeStatus: subscription.status,
    collectionPaused: paused,
    cancelAtPeriodEnd: subscription.cancel_at_period_end ?? false,
    currentPeriodEnd: periodEnd ? new Date(periodEnd * 1000) : null,
  };
}

/**
 * Stripe's clock when it produced a response (its `Date` header), the version of a snapshot read
 * through the API; without the header, the second of `now` (the Clock's). Webhook snapshots use
 * the event's `created`; both have one-second resolution.
 */
export function providerTimeOf(
  response: { lastResponse?: { headers?: Record<string, string> } },
  now: Date,
) {
  const header = response.lastResponse?.headers?.['date'];
  const parsed = header ? Date.parse(header) : NaN;
  return new Date(Number.isNaN(parsed) ? Math.floor(now.getTime() / 1000) * 1000 : parsed);
}

/** The `data` of a `subscription.updated` webhook event: the state the API reports, no secret. */
export function subscriptionEventData(snapshot: SubscriptionSnapshot): Record<string, unknown> {
  return {
    id: snapshot.stripeSubscriptionId,
    status: snapshot.status,
    price_id: snapshot.priceId,
    current_period_end: snapshot.currentPeriodEnd?.toISOString() ?? null,
    cancel_at_period_end: snapshot.cancelAtPeriodEnd,
  };
}
