import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import { PinoLogger } from 'nestjs-pino';
import type Stripe from 'stripe';
import { DataSource, EntityManager } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import type { BillingConfig } from '../config/billing.config';
import { notConfigured, StripeGateway } from './stripe-gateway';
import {
  applySubscriptionSnapshot,
  providerTimeOf,
  snapshotOf,
  SubscriptionSnapshot,
} from './subscription-snapshots';

/** Stripe's own default: a signature older than five minutes is refused (replay protection). */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

type Outcome = 'applied' | 'stale' | 'ignored' | 'duplicate';

function invalidSignature(): AppError {
  return new AppError('invalid_signature', 'The Stripe-Signature header does not verify');
}

function idOf(value: string | { id: string } | null | undefined): string | null {
  if (!value) return null;
  return typeof value === 'string' ? value : value.id;
}

/**
 * Applies Stripe events to the local state. Each event id is inserted in the same transaction as
 * the change it causes, so a redelivered event changes nothing and a failed one (5xx, Stripe
 * retries) leaves no trace. Ordering is by Stripe's clock: a snapshot older than the one held is
 * recorded but not applied.
 */
@Injectable()
export class BillingWebhooksService {
  private readonly secrets: string[];

  constructor(
    config: ConfigService,
    private readonly stripe: StripeGateway,
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly logger: PinoLogger,
  ) {
    this.secrets = config.getOrThrow<BillingConfig>('billing').webhookSecrets;
    this.logger.setContext(BillingWebhooksService.name);
  }

  async receive(rawBody: Buffer | undefined, signature: string | undefined): Promise<void> {
    if (!this.stripe.configured || this.secrets.length === 0) throw notConfigured();
    if (!rawBody || rawBody.length === 0 || !signature) throw invalidSignature();
    const event = this.stripe.verifyWebhook(
      rawBody,
      signature,
      this.secrets,
      WEBHOOK_TOLERANCE_SECONDS,
    );
    if (!event) throw invalidSignature();
    const outcome = await this.process(event);
    this.logger.info({ eventId: event.id, eventType: event.type, outcome }, 'stripe event');
  }

  private async process(event: Stripe.Event): Promise<Outcome> {
    const seen: unknown[] = await this.dataSource.query(
      'SELECT 1 FROM billing_events WHERE id = $1',
      [event.id],
    );
    if (seen.length > 0) return 'duplicate';
    const eventTime = new Date(event.created * 1000);
    switch (event.type) {
      case 'customer.subscription.created':
      case 'customer.subscription.updated':
      case 'customer.subscription.deleted':
        return this.onSubscription(event, event.data.object, eventTime);
      case 'invoice.paid':
      case 'invoice.payment_failed':
        return this.record(event, (manager) =>
          this.onInvoice(
            manager,
            event.data.object,
            event.type === 'invoice.paid' ? 'paid' : 'payment_failed',
            eventTime,
          ),
        );
      case 'setup_intent.succeeded':
        return this.record(event, (manager) =>
          this.onSetupIntentSucceeded(manager, event.data.object, eventTime),
        );
      default:
        return this.record(event, async () => 'ignored');
    }
  }

  /**
   * An event's payload is applied when it is newer than the state held, ignored when older. On a
   * tie (same second) its order is unknown, so the subscription is re-read from Stripe instead.
   */
  private async onSubscription(
    event: Stripe.Event,
    subscription: Stripe.Subscription,
    eventTime: Date,
  ): Promise<Outcome> {
    let snapshot: SubscriptionSnapshot = snapshotOf(subscription);
    let version = eventTime;
    let sameTimeWins = false;
    const held: Array<{ provider_updated_at: Date }> = await this.dataSource.query(
      'SELECT provider_updated_at FROM billing_subscriptions WHERE stripe_subscription_id = $1',
      [snapshot.stripeSubscriptionId],
    );
    if (held[0] && held[0].provider_updated_at.getTime() === eventTime.getTime()) {
      const fresh = await this.stripe.call('subscriptions.retrieve', (stripe) =>
        stripe.subscriptions.retrieve(snapshot.stripeSubscriptionId),
      );
      snapshot = snapshotOf(fresh);
      version = providerTimeOf(fresh);
      sameTimeWins = true;
    }
    return this.record(event, async (manager) => {
      const organizationId = await this.organizationOf(manager, snapshot.stripeCustomerId);
      if (!organizationId) return 'ignored';
      const outcome = await applySubscriptionSnapshot(
        manager,
        organizationId,
        snapshot,
        version,
        sameTimeWins,
      );
      if (outcome === 'conflict') {
        this.logger.warn(
          { eventId: event.id, stripeSubscriptionId: snapshot.stripeSubscriptionId },
          'a second live subscription for the organization was not mirrored',
        );
        return 'ignored';
      }
      return outcome;
    });
  }

  private async onInvoice(
    manager: EntityManager,
    invoice: Stripe.Invoice,
    status: 'paid' | 'payment_failed',
    eventTime: Date,
  ): Promise<Outcome> {
    const subscriptionId = idOf(invoice.parent?.subscription_details?.subscription);
    if (!subscriptionId) return 'ignored';
    // Newer wins; within the same second `paid` wins over `payment_failed` (it is final).
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
      [subscriptionId, invoice.id, status, eventTime],
    );
    return updated.length > 0 ? 'applied' : 'stale';
  }

  /** The newest saved payment method becomes the one new subscriptions charge. */
  private async onSetupIntentSucceeded(
    manager: EntityManager,
    intent: Stripe.SetupIntent,
    eventTime: Date,
  ): Promise<Outcome> {
    const customerId = idOf(intent.customer);
    const paymentMethodId = idOf(intent.payment_method);
    if (!customerId || !paymentMethodId) return 'ignored';
    const updated: unknown[] = await manager.query(
      `WITH updated AS (
         UPDATE billing_customers
            SET default_payment_method_id = $2, default_payment_method_at = $3, updated_at = now()
          WHERE stripe_customer_id = $1
            AND (default_payment_method_at IS NULL OR default_payment_method_at <= $3)
          RETURNING organization_id)
       SELECT organization_id FROM updated`,
      [customerId, paymentMethodId, eventTime],
    );
    return updated.length > 0 ? 'applied' : 'stale';
  }

  /**
   * Runs the change and stores the event id in one transaction. A concurrent delivery of the
   * same event waits on the primary key and then finds it taken: applied once.
   */
  private async record(
    event: Stripe.Event,
    change: (manager: EntityManager) => Promise<Outcome>,
  ): Promise<Outcome> {
    return this.dataSource.transaction(async (manager) => {
      const inserted: unknown[] = await manager.query(
        `INSERT INTO billing_events (id, type, event_created_at, outcome)
         VALUES ($1, $2, $3, 'pending') ON CONFLICT (id) DO NOTHING RETURNING id`,
        [event.id, event.type, new Date(event.created * 1000)],
      );
      if (inserted.length === 0) return 'duplicate';
      const outcome = await change(manager);
      await manager.query('UPDATE billing_events SET outcome = $2 WHERE id = $1', [
        event.id,
        outcome,
      ]);
      return outcome;
    });
  }

  private async organizationOf(manager: EntityManager, customerId: string): Promise<string | null> {
    const rows: Array<{ organization_id: string }> = await manager.query(
      'SELECT organization_id FROM billing_customers WHERE stripe_customer_id = $1',
      [customerId],
    );
    return rows[0]?.organization_id ?? null;
  }
}
