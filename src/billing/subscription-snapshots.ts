import type Stripe from 'stripe';
import type { EntityManager } from 'typeorm';
import type { SubscriptionStatus } from './entities/billing-subscription.entity';

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

const ENDED = new Set(['canceled', 'incomplete_expired']);

export function snapshotOf(subscription: Stripe.Subscription): SubscriptionSnapshot {
  const item = subscription.items?.data?.[0];
  const paused = subscription.pause_collection != null;
  const status = (
    paused && !ENDED.has(subscription.status) ? 'suspended' : subscription.status
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
    currentPeriodEnd: item?.current_period_end ? new Date(item.current_period_end * 1000) : null,
  };
}

/**
 * Stripe's clock when it produced a response (its `Date` header), the version of a snapshot read
 * through the API. Webhook snapshots use the event's `created`; both have one-second resolution.
 */
export function providerTimeOf(response: { lastResponse?: { headers?: Record<string, string> } }) {
  const header = response.lastResponse?.headers?.['date'];
  const parsed = header ? Date.parse(header) : NaN;
  return new Date(Number.isNaN(parsed) ? Math.floor(Date.now() / 1000) * 1000 : parsed);
}

export type ApplyOutcome = 'applied' | 'stale' | 'conflict';

/**
 * Writes the snapshot unless the row already holds a newer one: state never moves backwards.
 * `sameTimeWins` is for snapshots known to be current (an API response, a fresh re-read), which
 * may replace one of the same second; an event's payload may not (its order within the second is
 * unknown). `conflict`: the organization already has another live subscription.
 */
export async function applySubscriptionSnapshot(
  manager: EntityManager,
  organizationId: string,
  snapshot: SubscriptionSnapshot,
  version: Date,
  sameTimeWins: boolean,
): Promise<ApplyOutcome> {
  const values = [
    snapshot.stripeSubscriptionId,
    snapshot.priceId,
    snapshot.status,
    snapshot.stripeStatus,
    snapshot.collectionPaused,
    snapshot.cancelAtPeriodEnd,
    snapshot.currentPeriodEnd,
    version,
  ];
  for (let attempt = 0; attempt < 2; attempt++) {
    const updated: unknown[] = await manager.query(
      `WITH updated AS (
         UPDATE billing_subscriptions
            SET price_id = COALESCE($2, price_id), status = $3, stripe_status = $4,
                collection_paused = $5, cancel_at_period_end = $6, current_period_end = $7,
                provider_updated_at = $8, revision = revision + 1, updated_at = now()
          WHERE stripe_subscription_id = $1 AND organization_id = $9
            AND (provider_updated_at < $8 OR ($10 AND provider_updated_at = $8))
          RETURNING id)
       SELECT id FROM updated`,
      [...values, organizationId, sameTimeWins],
    );
    if (updated.length > 0) return 'applied';
    const existing: unknown[] = await manager.query(
      'SELECT 1 FROM billing_subscriptions WHERE stripe_subscription_id = $1',
      [snapshot.stripeSubscriptionId],
    );
    if (existing.length > 0) return 'stale';
    // No target: a live subscription of the organization and a concurrent insert of this
    // subscription both end here without aborting the transaction.
    const inserted: unknown[] = await manager.query(
      `INSERT INTO billing_subscriptions
         (stripe_subscription_id, price_id, status, stripe_status, collection_paused,
          cancel_at_period_end, current_period_end, provider_updated_at, organization_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT DO NOTHING
       RETURNING id`,
      [...values, organizationId],
    );
    if (inserted.length > 0) return 'applied';
    const raced: unknown[] = await manager.query(
      'SELECT 1 FROM billing_subscriptions WHERE stripe_subscription_id = $1',
      [snapshot.stripeSubscriptionId],
    );
    if (raced.length === 0) return 'conflict';
  }
  return 'stale';
}
