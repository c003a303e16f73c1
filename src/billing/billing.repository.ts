import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, In, Not } from 'typeorm';
import { BillingCustomer } from './entities/billing-customer.entity';
import {
  BillingSubscription,
  ENDED_STATUSES,
  ENDED_STATUSES_SQL,
} from './entities/billing-subscription.entity';
import type { SubscriptionSnapshot } from './subscription-snapshots';

export type ApplyOutcome = 'applied' | 'stale' | 'conflict';

export type InvoiceOutcome = 'paid' | 'payment_failed';

/**
 * The SQL of billing, all of it through TypeORM (no billing path needs the pg pool's shortcut).
 * Entity reads where the repository API says it plainly (the response mappers take entities);
 * SQL text where a write is conditional on the version held (newer wins) or must not abort the
 * transaction on a conflict (ON CONFLICT DO NOTHING), which that API cannot express.
 * billing_events is SQL text throughout: its lookup is the first step of every webhook delivery.
 * Methods that take a `manager` run in the caller's transaction.
 */
@Injectable()
export class BillingRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  // --- customers ---

  findCustomer(organizationId: string): Promise<BillingCustomer | null> {
    return this.dataSource.manager.findOneBy(BillingCustomer, { organizationId });
  }

  /**
   * Stores the organization's Stripe customer unless it has one already (a concurrent first need
   * may have stored the same one), then answers the row held.
   */
  async insertCustomerIfAbsent(
    organizationId: string,
    stripeCustomerId: string,
  ): Promise<BillingCustomer> {
    await this.dataSource.query(
      `INSERT INTO billing_customers (organization_id, stripe_customer_id)
       VALUES ($1, $2) ON CONFLICT DO NOTHING`,
      [organizationId, stripeCustomerId],
    );
    return this.dataSource.manager.findOneByOrFail(BillingCustomer, { organizationId });
  }

  async organizationOfCustomer(
    manager: EntityManager,
    stripeCustomerId: string,
  ): Promise<string | null> {
    const customer = await manager.findOne(BillingCustomer, {
      select: { organizationId: true },
      where: { stripeCustomerId },
    });
    return customer?.organizationId ?? null;
  }

  /**
   * The payment method new subscriptions charge, unless a newer event set another one; answers
   * whether it was stored.
   */
  async setDefaultPaymentMethodIfNewer(
    manager: EntityManager,
    stripeCustomerId: string,
    paymentMethodId: string,
    at: Date,
  ): Promise<boolean> {
    const updated: unknown[] = await manager.query(
      `WITH updated AS (
         UPDATE billing_customers
            SET default_payment_method_id = $2, default_payment_method_at = $3, updated_at = now()
          WHERE stripe_customer_id = $1
            AND (default_payment_method_at IS NULL OR default_payment_method_at <= $3)
          RETURNING organization_id)
       SELECT organization_id FROM updated`,
      [stripeCustomerId, paymentMethodId, at],
    );
    return updated.length > 0;
  }

  // --- subscriptions ---

  /**
   * How many subscriptions the organization has had, and how many of them are live, read in one
   * snapshot (a start that saw none live also saw the generation of that moment).
   */
  async subscriptionCounts(organizationId: string): Promise<{ generation: number; live: number }> {
    const [counts]: Array<{ generation: number; live: number }> = await this.dataSource.query(
      `SELECT count(*)::int AS generation,
              (count(*) FILTER (WHERE status NOT IN (${ENDED_STATUSES_SQL})))::int AS live
         FROM billing_subscriptions WHERE organization_id = $1`,
      [organizationId],
    );
    return counts;
  }

  findLiveSubscription(organizationId: string): Promise<BillingSubscription | null> {
    return this.dataSource.manager.findOneBy(BillingSubscription, {
      organizationId,
      status: Not(In([...ENDED_STATUSES])),
    });
  }

  /** The live subscription, else the most recent ended one. */
  findCurrentSubscription(organizationId: string): Promise<BillingSubscription | null> {
    return this.dataSource.manager
      .createQueryBuilder(BillingSubscription, 's')
      .where('s.organization_id = :organizationId', { organizationId })
      .orderBy(`(s.status IN (${ENDED_STATUSES_SQL}))`, 'ASC')
      .addOrderBy('s.created_at', 'DESC')
      .getOne();
  }

  getSubscription(stripeSubscriptionId: string): Promise<BillingSubscription> {
    return this.dataSource.manager.findOneByOrFail(BillingSubscription, { stripeSubscriptionId });
  }

  /** Stripe's time of the snapshot held, or null when the subscription is not mirrored. */
  async providerTimeHeld(stripeSubscriptionId: string): Promise<Date | null> {
    const held = await this.dataSource.manager.findOne(BillingSubscription, {
      select: { id: true, providerUpdatedAt: true },
      where: { stripeSubscriptionId },
    });
    return held?.providerUpdatedAt ?? null;
  }

  /**
   * Writes the snapshot unless the row already holds a newer one: state never moves backwards.
   * `sameTimeWins` is for snapshots known to be current (an API response, a fresh re-read), which
   * may replace one of the same second; an event's payload may not (its order within the second
   * is unknown). `conflict`: the organization already has another live subscription.
   */
  async applySubscriptionSnapshot(
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
      if (await this.subscriptionExists(manager, snapshot.stripeSubscriptionId)) return 'stale';
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
      if (!(await this.subscriptionExists(manager, snapshot.stripeSubscriptionId))) {
        return 'conflict';
      }
    }
    return 'stale';
  }

  /**
   * The subscription's latest invoice outcome, unless a newer one is held; within the same
   * second `paid` wins over `payment_failed` (it is final). Answers whether it was stored.
   */
  async setLatestInvoiceIfNewer(
    manager: EntityManager,
    stripeSubscriptionId: string,
    invoiceId: string,
    status: InvoiceOutcome,
    at: Date,
  ): Promise<boolean> {
    const updated: unknown[] = await manager.query(
      `WITH updated AS (
         UPDATE billing_subscriptions
            SET latest_invoice_id = $2, latest_invoice_status = $3, latest_invoice_at = $4,
                updated_at = now()
          WHERE stripe_subscription_id = $1
            AND (latest_invoice_at IS NULL OR latest_invoice_at < $4
                 OR (latest_invoice_at = $4 AND $3 = 'paid'))
          RETURNING id)
       SELECT id FROM updated`,
      [stripeSubscriptionId, invoiceId, status, at],
    );
    return updated.length > 0;
  }

  private subscriptionExists(
    manager: EntityManager,
    stripeSubscriptionId: string,
  ): Promise<boolean> {
    return manager.existsBy(BillingSubscription, { stripeSubscriptionId });
  }

  // --- events ---

  /** The first step of every delivery, redeliveries included: one indexed probe, no builder. */
  async isEventRecorded(eventId: string): Promise<boolean> {
    const rows: unknown[] = await this.dataSource.query(
      'SELECT 1 FROM billing_events WHERE id = $1',
      [eventId],
    );
    return rows.length > 0;
  }

  /**
   * Claims the event in the caller's transaction; false when it is recorded already. A concurrent
   * delivery of the same event waits on the primary key, then finds it taken.
   */
  async insertEventIfAbsent(
    manager: EntityManager,
    event: { id: string; type: string; createdAt: Date },
  ): Promise<boolean> {
    const inserted: unknown[] = await manager.query(
      `INSERT INTO billing_events (id, type, event_created_at, outcome)
       VALUES ($1, $2, $3, 'pending') ON CONFLICT (id) DO NOTHING RETURNING id`,
      [event.id, event.type, event.createdAt],
    );
    return inserted.length > 0;
  }

  async setEventOutcome(manager: EntityManager, eventId: string, outcome: string): Promise<void> {
    await manager.query('UPDATE billing_events SET outcome = $2 WHERE id = $1', [eventId, outcome]);
  }
}
