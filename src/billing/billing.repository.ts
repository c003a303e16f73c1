import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { Columns } from '../database/columns';
import { cte, raw, type Sql, sql, withEntries } from '../database/sql';
import { webhookEventStep } from '../webhooks/webhook-event.step';
import type { BillingCustomer } from './entities/billing-customer.entity';
import type { BillingEvent } from './entities/billing-event.entity';
import {
  type BillingSubscription,
  ENDED_STATUSES_SQL,
} from './entities/billing-subscription.entity';
import { subscriptionEventData, type SubscriptionSnapshot } from './subscription-snapshots';

export type ApplyOutcome = 'applied' | 'stale' | 'conflict';

export type InvoiceOutcome = 'paid' | 'payment_failed';

const ENDED = raw(ENDED_STATUSES_SQL);

/** Every column of billing_customers, aliased to the entity's properties. */
const CUSTOMER = Columns.propertiesOf<BillingCustomer>()(
  'organizationId',
  'stripeCustomerId',
  'defaultPaymentMethodId',
  'defaultPaymentMethodAt',
  'createdAt',
  'updatedAt',
);

const CUSTOMER_ORGANIZATION = Columns.rowOf<BillingCustomer>()('organizationId');

/** Every column of billing_subscriptions, aliased to the entity's properties. */
const SUBSCRIPTION = Columns.propertiesOf<BillingSubscription>()(
  'id',
  'organizationId',
  'stripeSubscriptionId',
  'priceId',
  'status',
  'stripeStatus',
  'collectionPaused',
  'cancelAtPeriodEnd',
  'currentPeriodEnd',
  'providerUpdatedAt',
  'revision',
  'latestInvoiceId',
  'latestInvoiceStatus',
  'latestInvoiceAt',
  'createdAt',
  'updatedAt',
);

const PROVIDER_TIME = Columns.rowOf<BillingSubscription>()('providerUpdatedAt');

/** An organization's subscriptions ever, and the live ones among them. */
const SUBSCRIPTION_COUNTS = Columns.computed<{ generation: number; live: number }>({
  generation: sql`count(*)::int`,
  live: sql`(count(*) FILTER (WHERE status NOT IN (${ENDED})))::int`,
});

/**
 * The SQL of billing. SQL throughout, one style per table: its writes are conditional on the
 * version held (newer wins) or must not abort the transaction on a conflict (ON CONFLICT DO
 * NOTHING), which TypeORM's repository API cannot say. Reads answer the entities' shapes (the
 * response mappers take them). Methods that take a `manager` run in the caller's transaction;
 * `at` is the Clock's time of the change (`updated_at`, when a webhook event is due).
 */
@Injectable()
export class BillingRepository {
  constructor(private readonly database: Database) {}

  // --- customers ---

  async findCustomer(organizationId: string): Promise<BillingCustomer | null> {
    const row = await this.database.row(
      CUSTOMER.query`SELECT ${CUSTOMER} FROM billing_customers WHERE organization_id = ${organizationId}`,
    );
    return row ?? null;
  }

  /**
   * Stores the organization's Stripe customer unless it has one already (a concurrent first need
   * may have stored the same one), then answers the row held.
   */
  async insertCustomerIfAbsent(
    organizationId: string,
    stripeCustomerId: string,
  ): Promise<BillingCustomer> {
    await this.database.count(
      sql`INSERT INTO billing_customers (organization_id, stripe_customer_id)
          VALUES (${organizationId}, ${stripeCustomerId}) ON CONFLICT DO NOTHING`,
    );
    const held = await this.findCustomer(organizationId);
    if (!held) throw new Error(`billing customer of ${organizationId} is gone`);
    return held;
  }

  async organizationOfCustomer(
    manager: EntityManager,
    stripeCustomerId: string,
  ): Promise<string | null> {
    const row = await this.database.row(
      CUSTOMER_ORGANIZATION.query`SELECT ${CUSTOMER_ORGANIZATION} FROM billing_customers
           WHERE stripe_customer_id = ${stripeCustomerId}`,
      { manager },
    );
    return row?.organization_id ?? null;
  }

  /**
   * The payment method new subscriptions charge, unless a newer event set another one; answers
   * whether it was stored. `eventTime` is Stripe's, the version; `at` ours.
   */
  async setDefaultPaymentMethodIfNewer(
    manager: EntityManager,
    stripeCustomerId: string,
    paymentMethodId: string,
    eventTime: Date,
    at: Date,
  ): Promise<boolean> {
    const updated = await this.database.count(
      sql`UPDATE billing_customers
             SET default_payment_method_id = ${paymentMethodId},
                 default_payment_method_at = ${eventTime}, updated_at = ${at}
           WHERE stripe_customer_id = ${stripeCustomerId}
             AND (default_payment_method_at IS NULL
                  OR default_payment_method_at <= ${eventTime}::timestamptz)`,
      { manager },
    );
    return updated > 0;
  }

  // --- subscriptions ---

  /**
   * How many subscriptions the organization has had, and how many of them are live, read in one
   * snapshot (a start that saw none live also saw the generation of that moment).
   */
  async subscriptionCounts(
    organizationId: string,
    manager?: EntityManager,
  ): Promise<{ generation: number; live: number }> {
    const row = await this.database.row(
      SUBSCRIPTION_COUNTS.query`SELECT ${SUBSCRIPTION_COUNTS}
            FROM billing_subscriptions WHERE organization_id = ${organizationId}`,
      { manager },
    );
    return row!;
  }

  async findLiveSubscription(organizationId: string): Promise<BillingSubscription | null> {
    const row = await this.database.row(
      SUBSCRIPTION.query`SELECT ${SUBSCRIPTION} FROM billing_subscriptions
           WHERE organization_id = ${organizationId} AND status NOT IN (${ENDED})`,
    );
    return row ?? null;
  }

  /** The live subscription, else the most recent ended one. */
  async findCurrentSubscription(organizationId: string): Promise<BillingSubscription | null> {
    const row = await this.database.row(
      SUBSCRIPTION.query`SELECT ${SUBSCRIPTION} FROM billing_subscriptions
           WHERE organization_id = ${organizationId}
           ORDER BY (status IN (${ENDED})), created_at DESC
           LIMIT 1`,
    );
    return row ?? null;
  }

  async getSubscription(stripeSubscriptionId: string): Promise<BillingSubscription> {
    const row = await this.database.row(
      SUBSCRIPTION.query`SELECT ${SUBSCRIPTION} FROM billing_subscriptions
           WHERE stripe_subscription_id = ${stripeSubscriptionId}`,
    );
    if (!row) throw new Error(`subscription ${stripeSubscriptionId} is not mirrored`);
    return row;
  }

  /** Stripe's time of the snapshot held, or null when the subscription is not mirrored. */
  async providerTimeHeld(stripeSubscriptionId: string): Promise<Date | null> {
    const row = await this.database.row(
      PROVIDER_TIME.query`SELECT ${PROVIDER_TIME} FROM billing_subscriptions
           WHERE stripe_subscription_id = ${stripeSubscriptionId}`,
    );
    return row?.provider_updated_at ?? null;
  }

  /**
   * Writes the snapshot unless the row already holds a newer one: state never moves backwards.
   * `sameTimeWins` is for snapshots known to be current (an API response, a fresh re-read), which
   * may replace one of the same second; an event's payload may not (its order within the second
   * is unknown). `conflict`: the organization already has another live subscription. A snapshot
   * applied is announced in the same statement: a `subscription.updated` webhook event, due at
   * `at`.
   */
  async applySubscriptionSnapshot(
    manager: EntityManager,
    organizationId: string,
    snapshot: SubscriptionSnapshot,
    version: Date,
    sameTimeWins: boolean,
    at: Date,
  ): Promise<ApplyOutcome> {
    const announced = (change: string, statement: (lent: Sql) => Sql) => {
      const changed = cte(
        change,
        { webhook_data: sql`${JSON.stringify(subscriptionEventData(snapshot))}::jsonb` },
        statement,
      );
      return withEntries(
        [changed, webhookEventStep(changed, { organizationId, type: 'subscription.updated', at })],
        sql`SELECT id FROM ${changed.ref}`,
      );
    };
    const update = announced(
      'updated',
      (lent) => sql`
        UPDATE billing_subscriptions
           SET price_id = COALESCE(${snapshot.priceId}, price_id), status = ${snapshot.status},
               stripe_status = ${snapshot.stripeStatus},
               collection_paused = ${snapshot.collectionPaused},
               cancel_at_period_end = ${snapshot.cancelAtPeriodEnd},
               current_period_end = ${snapshot.currentPeriodEnd},
               provider_updated_at = ${version}, revision = revision + 1, updated_at = ${at}
         WHERE stripe_subscription_id = ${snapshot.stripeSubscriptionId}
           AND organization_id = ${organizationId}
           AND (provider_updated_at < ${version}::timestamptz
                OR (${sameTimeWins}::boolean AND provider_updated_at = ${version}::timestamptz))
        RETURNING id, ${lent}`,
    );
    // No target: a live subscription of the organization and a concurrent insert of this
    // subscription both end here without aborting the transaction.
    const insert = announced(
      'inserted',
      (lent) => sql`
        INSERT INTO billing_subscriptions
          (stripe_subscription_id, price_id, status, stripe_status, collection_paused,
           cancel_at_period_end, current_period_end, provider_updated_at, organization_id)
        VALUES (${snapshot.stripeSubscriptionId}, ${snapshot.priceId}, ${snapshot.status},
                ${snapshot.stripeStatus}, ${snapshot.collectionPaused},
                ${snapshot.cancelAtPeriodEnd}, ${snapshot.currentPeriodEnd}, ${version},
                ${organizationId})
        ON CONFLICT DO NOTHING
        RETURNING id, ${lent}`,
    );
    for (let attempt = 0; attempt < 2; attempt++) {
      if ((await this.database.count(update, { manager })) > 0) return 'applied';
      if (await this.subscriptionMirrored(manager, snapshot.stripeSubscriptionId)) return 'stale';
      if ((await this.database.count(insert, { manager })) > 0) return 'applied';
      if (!(await this.subscriptionMirrored(manager, snapshot.stripeSubscriptionId))) {
        return 'conflict';
      }
    }
    return 'stale';
  }

  /**
   * Locks the subscription's row until the transaction ends, so that two transactions that both
   * act on it (two starts answered with the same subscription) take turns.
   */
  async lockSubscription(manager: EntityManager, stripeSubscriptionId: string): Promise<void> {
    await this.database.count(
      sql`SELECT 1 FROM billing_subscriptions
           WHERE stripe_subscription_id = ${stripeSubscriptionId} FOR UPDATE`,
      { manager },
    );
  }

  /**
   * The subscription's latest invoice outcome, unless a newer one is held; within the same
   * second `paid` wins over `payment_failed` (it is final). Answers whether it was stored.
   * `eventTime` is Stripe's, the version; `at` ours.
   */
  async setLatestInvoiceIfNewer(
    manager: EntityManager,
    stripeSubscriptionId: string,
    invoiceId: string,
    status: InvoiceOutcome,
    eventTime: Date,
    at: Date,
  ): Promise<boolean> {
    const updated = await this.database.count(
      sql`UPDATE billing_subscriptions
             SET latest_invoice_id = ${invoiceId}, latest_invoice_status = ${status},
                 latest_invoice_at = ${eventTime}, updated_at = ${at}
           WHERE stripe_subscription_id = ${stripeSubscriptionId}
             AND (latest_invoice_at IS NULL OR latest_invoice_at < ${eventTime}::timestamptz
                  OR (latest_invoice_at = ${eventTime}::timestamptz AND ${status}::text = 'paid'))`,
      { manager },
    );
    return updated > 0;
  }

  /** Whether the Stripe subscription has a row here (its created event, or our own start). */
  async subscriptionMirrored(
    manager: EntityManager,
    stripeSubscriptionId: string,
  ): Promise<boolean> {
    const found = await this.database.count(
      sql`SELECT 1 FROM billing_subscriptions WHERE stripe_subscription_id = ${stripeSubscriptionId}`,
      { manager },
    );
    return found > 0;
  }

  // --- events ---

  /** The first step of every delivery, redeliveries included: one indexed probe. */
  async isEventRecorded(eventId: string): Promise<boolean> {
    const found = await this.database.count(
      sql`SELECT 1 FROM billing_events WHERE id = ${eventId}`,
    );
    return found > 0;
  }

  /**
   * Claims the event in the caller's transaction; false when it is recorded already. A concurrent
   * delivery of the same event waits on the primary key, then finds it taken.
   */
  async insertEventIfAbsent(
    manager: EntityManager,
    event: Pick<BillingEvent, 'id' | 'type' | 'eventCreatedAt'>,
  ): Promise<boolean> {
    const inserted = await this.database.count(
      sql`INSERT INTO billing_events (id, type, event_created_at, outcome)
          VALUES (${event.id}, ${event.type}, ${event.eventCreatedAt}, 'pending')
          ON CONFLICT (id) DO NOTHING`,
      { manager },
    );
    return inserted > 0;
  }

  async setEventOutcome(manager: EntityManager, eventId: string, outcome: string): Promise<void> {
    await this.database.count(
      sql`UPDATE billing_events SET outcome = ${outcome} WHERE id = ${eventId}`,
      { manager },
    );
  }
}
