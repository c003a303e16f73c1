import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import type Stripe from 'stripe';
import type { EntityManager } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import { Clock } from '../common/time/clock';
import { billingConfig } from '../config/billing.config';
import { Database } from '../database/database';
import { BillingRepository } from './billing.repository';
import { isEventEnvelope, isInvoicePayload, isSubscriptionPayload } from './stripe-event-shapes';
import { notConfigured, StripeGateway } from './stripe-gateway';
import { providerTimeOf, snapshotOf, SubscriptionSnapshot } from './subscription-snapshots';

/** Stripe's own default: a signature older than five minutes is refused (replay protection). */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

export type WebhookOutcome = 'applied' | 'stale' | 'ignored' | 'duplicate';

function invalidSignature(): AppError {
  return new AppError('invalid_signature', 'The Stripe-Signature header does not verify');
}

/** Where Stripe API versions before 2025-03-31 (basil) name an invoice's subscription. */
type BeforeBasilInvoice = { subscription?: string | { id: string } | null };

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
    @Inject(billingConfig.KEY) settings: ConfigType<typeof billingConfig>,
    private readonly stripe: StripeGateway,
    private readonly database: Database,
    private readonly billing: BillingRepository,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
  ) {
    this.secrets = settings.webhookSecrets;
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
    // Signed, but without an id or a time: nothing to record it by, and sending it again cannot
    // help (400, not a 5xx that Stripe would retry for days).
    if (!isEventEnvelope(event)) {
      this.logger.warn('stripe event without an id, a time or an object refused');
      throw AppError.validation([
        { field: 'event', problem: 'must have an id, a type, a created time and data.object' },
      ]);
    }
    await this.handle(event);
  }

  /** Applies a verified event (at most once) and logs its outcome. */
  async handle(event: Stripe.Event): Promise<WebhookOutcome> {
    let outcome: WebhookOutcome;
    try {
      outcome = await this.process(event);
    } catch (error) {
      // Answered 5xx and rolled back: Stripe delivers it again.
      const reason = error instanceof Error ? error.message : String(error);
      this.logger.warn(
        { eventId: event.id, eventType: event.type, reason },
        'stripe event deferred',
      );
      throw error;
    }
    this.logger.info({ eventId: event.id, eventType: event.type, outcome }, 'stripe event');
    return outcome;
  }

  private async process(event: Stripe.Event): Promise<WebhookOutcome> {
    if (await this.billing.isEventRecorded(event.id)) return 'duplicate';
    const eventTime = new Date(event.created * 1000);
    switch (event.type) {
      case 'customer.subscription.created':
      case 'customer.subscription.updated':
      case 'customer.subscription.deleted':
        if (!isSubscriptionPayload(event.data.object)) return this.ignoreMalformed(event);
        return this.onSubscription(event, event.data.object, eventTime);
      case 'invoice.paid':
      case 'invoice.payment_failed':
        if (!isInvoicePayload(event.data.object)) return this.ignoreMalformed(event);
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
  ): Promise<WebhookOutcome> {
    let snapshot: SubscriptionSnapshot = snapshotOf(subscription);
    let version = eventTime;
    let sameTimeWins = false;
    const held = await this.billing.providerTimeHeld(snapshot.stripeSubscriptionId);
    if (held?.getTime() === eventTime.getTime()) {
      // The held time may be this very event's, applied by a concurrent delivery since the check
      // above (it commits with its record): a duplicate, not a tie to ask Stripe about.
      if (await this.billing.isEventRecorded(event.id)) return 'duplicate';
      const fresh = await this.stripe.call('subscriptions.retrieve', (stripe) =>
        stripe.subscriptions.retrieve(snapshot.stripeSubscriptionId),
      );
      snapshot = snapshotOf(fresh);
      version = providerTimeOf(fresh, this.clock.now());
      sameTimeWins = true;
    }
    return this.record(event, async (manager) => {
      const organizationId = await this.billing.organizationOfCustomer(
        manager,
        snapshot.stripeCustomerId,
      );
      if (!organizationId) return 'ignored';
      const outcome = await this.billing.applySubscriptionSnapshot(
        manager,
        organizationId,
        snapshot,
        version,
        sameTimeWins,
        this.clock.now(),
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
  ): Promise<WebhookOutcome> {
    const subscriptionId = idOf(
      invoice.parent?.subscription_details?.subscription ??
        (invoice as Stripe.Invoice & BeforeBasilInvoice).subscription,
    );
    if (!subscriptionId) return 'ignored';
    const stored = await this.billing.setLatestInvoiceIfNewer(
      manager,
      subscriptionId,
      invoice.id,
      status,
      eventTime,
      this.clock.now(),
    );
    if (stored) return 'applied';
    if (await this.billing.subscriptionMirrored(manager, subscriptionId)) return 'stale';
    const customerId = idOf(invoice.customer);
    const organizationId = customerId
      ? await this.billing.organizationOfCustomer(manager, customerId)
      : null;
    if (!organizationId) return 'ignored';
    // A second live subscription of the organization is never mirrored (see onSubscription's
    // conflict), so neither are its invoices: waiting for it would fail every delivery.
    if ((await this.billing.subscriptionCounts(organizationId, manager)).live > 0) return 'ignored';
    // Our customer's subscription, not mirrored yet (its created event comes later, or our own
    // start has not stored it yet): refused and rolled back, so that Stripe delivers the invoice
    // again once it is here.
    throw new AppError(
      'service_unavailable',
      "The invoice's subscription is not mirrored yet; Stripe delivers the event again",
    );
  }

  /** The newest saved payment method becomes the one new subscriptions charge. */
  private async onSetupIntentSucceeded(
    manager: EntityManager,
    intent: Stripe.SetupIntent,
    eventTime: Date,
  ): Promise<WebhookOutcome> {
    const customerId = idOf(intent.customer);
    const paymentMethodId = idOf(intent.payment_method);
    if (!customerId || !paymentMethodId) return 'ignored';
    const stored = await this.billing.setDefaultPaymentMethodIfNewer(
      manager,
      customerId,
      paymentMethodId,
      eventTime,
      this.clock.now(),
    );
    return stored ? 'applied' : 'stale';
  }

  /**
   * An event of a type the service applies whose object lacks what it reads (or has it of
   * another type): recorded as ignored, so a redelivery is a duplicate, and logged to be looked at.
   */
  private ignoreMalformed(event: Stripe.Event): Promise<WebhookOutcome> {
    this.logger.warn(
      { eventId: event.id, eventType: event.type },
      'stripe event ignored: its object does not hold what the service reads',
    );
    return this.record(event, async () => 'ignored');
  }

  /**
   * Runs the change and stores the event id in one transaction. A concurrent delivery of the
   * same event waits on the primary key and then finds it taken: applied once.
   */
  private async record(
    event: Stripe.Event,
    change: (manager: EntityManager) => Promise<WebhookOutcome>,
  ): Promise<WebhookOutcome> {
    return this.database.transaction(async (manager) => {
      const claimed = await this.billing.insertEventIfAbsent(manager, {
        id: event.id,
        type: event.type,
        eventCreatedAt: new Date(event.created * 1000),
      });
      if (!claimed) return 'duplicate';
      const outcome = await change(manager);
      await this.billing.setEventOutcome(manager, event.id, outcome);
      return outcome;
    });
  }
}
