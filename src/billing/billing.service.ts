import { Inject, Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import { AuditService } from '../audit/audit.service';
import { sha256 } from '../common/crypto/sha256';
import type { CallerContext } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Page } from '../common/pagination/pagination';
import { Clock } from '../common/time/clock';
import { type BillingConfig, billingConfig } from '../config/billing.config';
import { Database } from '../database/database';
import {
  BillingUsageDto,
  InvoiceDto,
  SetupIntentDto,
  SubscriptionDto,
  toInvoiceResponse,
  toSubscriptionResponse,
} from './dto/billing.dto';
import { BillingRepository } from './billing.repository';
import { MeterEventsRepository } from './meter-events.repository';
import { UsageService } from '../usage/usage.service';
import { BillingCustomer } from './entities/billing-customer.entity';
import { BillingSubscription } from './entities/billing-subscription.entity';
import { StripeGateway } from './stripe-gateway';
import { providerTimeOf, snapshotOf } from './subscription-snapshots';

/** Statuses from which a subscription may be suspended. */
const SUSPENDABLE = new Set(['active', 'trialing', 'past_due', 'unpaid']);

function subscriptionExists(): AppError {
  return new AppError(
    'subscription_exists',
    'The organization already has a live subscription (suspend, resume or cancel it instead)',
  );
}

@Injectable()
export class BillingService {
  constructor(
    private readonly stripe: StripeGateway,
    private readonly database: Database,
    private readonly billing: BillingRepository,
    private readonly logger: PinoLogger,
    private readonly audit: AuditService,
    private readonly clock: Clock,
    private readonly usage: UsageService,
    private readonly meterEvents: MeterEventsRepository,
    @Inject(billingConfig.KEY) private readonly config: BillingConfig,
  ) {
    this.logger.setContext(BillingService.name);
  }

  /** What the month's metered billing rests on, counted here (no call to Stripe). */
  async usageOf(organizationId: string, month?: string): Promise<BillingUsageDto> {
    this.stripe.assertConfigured();
    const asked = month ?? this.usage.currentMonth();
    const [relationships, tokens, pending] = await Promise.all([
      this.usage.activeRelationships(organizationId, asked),
      this.usage.tokens(organizationId, asked),
      this.meterEvents.countPending(organizationId, `${asked}-01`),
    ]);
    return {
      month: asked,
      active_relationships: relationships.active_relationships,
      tokens: tokens.prompt_tokens + tokens.completion_tokens,
      meter_events_pending: pending,
    };
  }

  /** Straight from Stripe (the source of truth), Stripe's cursor passed through. */
  async listInvoices(
    organizationId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<InvoiceDto>> {
    this.stripe.assertConfigured();
    // A read never needs a customer: an organization without one simply has no invoices.
    const customer = await this.billing.findCustomer(organizationId);
    if (!customer) return { data: [], has_more: false };
    const list = await this.stripe.call(
      'invoices.list',
      (stripe) =>
        stripe.invoices.list({
          customer: customer.stripeCustomerId,
          limit,
          ...(startingAfter ? { starting_after: startingAfter } : {}),
        }),
      // A cursor naming no invoice of the customer's (made up, another customer's, a deleted
      // draft) is the client's mistake, not the provider's failure (502).
      (error) =>
        error instanceof Stripe.errors.StripeInvalidRequestError && error.param === 'starting_after'
          ? AppError.validation([
              { field: 'starting_after', problem: 'names no invoice of this organization' },
            ])
          : undefined,
    );
    return { data: list.data.map(toInvoiceResponse), has_more: list.has_more };
  }

  /**
   * A SetupIntent for saving a payment method. The client_secret goes to the caller only. A
   * client-sent Idempotency-Key makes a retried request answer the same SetupIntent.
   */
  async createSetupIntent(
    organizationId: string,
    clientIdempotencyKey?: string,
  ): Promise<SetupIntentDto> {
    this.stripe.assertConfigured();
    const customer = await this.ensureCustomer(organizationId);
    // A digest keeps Stripe's key within its 255 characters whatever the client's (up to 255).
    const idempotencyKey = `setup-intent:${organizationId}:${
      clientIdempotencyKey ? sha256(clientIdempotencyKey).toString('hex') : randomUUID()
    }`;
    const intent = await this.stripe.call('setupIntents.create', (stripe) =>
      stripe.setupIntents.create(
        {
          customer: customer.stripeCustomerId,
          usage: 'off_session',
          metadata: { organization_id: organizationId },
        },
        { idempotencyKey },
      ),
    );
    if (!intent.client_secret) {
      throw new AppError('payment_provider_error', 'The payment provider sent no client_secret');
    }
    return { setup_intent_id: intent.id, client_secret: intent.client_secret };
  }

  async getSubscription(organizationId: string): Promise<SubscriptionDto> {
    this.stripe.assertConfigured();
    const row = await this.billing.findCurrentSubscription(organizationId);
    if (!row) throw AppError.notFound('Subscription');
    return toSubscriptionResponse(row);
  }

  /**
   * A price Stripe does not know, or an archived one, is refused before the start's create. Stripe
   * keeps a create's 400 under its idempotency key for a day, and the key is the organization's
   * next start: a start with a mistyped price would make every start of that day answer 409.
   */
  private async assertUsablePrice(priceId: string): Promise<void> {
    const unusable = () =>
      AppError.validation([{ field: 'price_id', problem: 'is not a usable price' }]);
    // Not one the operator offers (STRIPE_PRICE_IDS): an internal or free price of the same
    // account would otherwise do (found by review).
    const offered = this.config.priceIds;
    if (offered.length > 0 && !offered.includes(priceId)) throw unusable();
    const price = await this.stripe.call(
      'prices.retrieve',
      (stripe) => stripe.prices.retrieve(priceId),
      (error) =>
        error instanceof Stripe.errors.StripeInvalidRequestError ? unusable() : undefined,
    );
    if (!price.active) throw unusable();
  }

  /**
   * Starts the organization's subscription. The idempotency key is derived from the organization
   * and how many subscriptions it has had, so a retry after a timeout (nothing stored locally yet)
   * replays Stripe's answer instead of creating a second subscription, and a concurrent request
   * for another price is refused by Stripe (same key, other parameters) → 409.
   */
  async createSubscription(caller: CallerContext, priceId: string): Promise<SubscriptionDto> {
    this.stripe.assertConfigured();
    const { organizationId } = caller;
    // One snapshot for both: a start that read "none live" also read the generation of that
    // moment, so a concurrent start either sees the live row (409) or sends the same key.
    const { generation, live } = await this.billing.subscriptionCounts(organizationId);
    if (live > 0) throw subscriptionExists();
    await this.assertUsablePrice(priceId);
    const customer = await this.ensureCustomer(organizationId);
    const subscription = await this.stripe.call(
      'subscriptions.create',
      (stripe) =>
        stripe.subscriptions.create(
          {
            customer: customer.stripeCustomerId,
            items: [{ price: priceId }],
            metadata: { organization_id: organizationId },
            ...(customer.defaultPaymentMethodId
              ? { default_payment_method: customer.defaultPaymentMethodId }
              : {}),
          },
          { idempotencyKey: `subscription-create:${organizationId}:${generation}` },
        ),
      (error) => {
        if (error instanceof Stripe.errors.StripeIdempotencyError) return subscriptionExists();
        if (
          error instanceof Stripe.errors.StripeInvalidRequestError &&
          error.param?.includes('price')
        ) {
          return AppError.validation([{ field: 'price_id', problem: 'is not a usable price' }]);
        }
        return undefined;
      },
    );
    const outcome = await this.database.transaction(async (manager) => {
      const now = this.clock.now();
      const applied = await this.billing.applySubscriptionSnapshot(
        manager,
        organizationId,
        snapshotOf(subscription),
        providerTimeOf(subscription, now),
        true,
        now,
      );
      // Concurrent starts for one price send one idempotency key and get the same subscription
      // back; each applies it (or finds a newer state held), then they take turns on its row, so
      // the second sees the first's event: one event says it started.
      if (applied !== 'conflict') {
        await this.billing.lockSubscription(manager, subscription.id);
        await this.audit.recordOnce(manager, caller, {
          organizationId,
          action: 'subscription.started',
          target: { type: 'subscription', id: subscription.id },
          details: { price_id: priceId, status: subscription.status },
        });
      }
      return applied;
    });
    if (outcome === 'conflict') {
      await this.cancelOrphan(subscription.id);
      throw subscriptionExists();
    }
    return this.subscriptionResponse(subscription.id);
  }

  /**
   * Another subscription became live meanwhile (e.g. created in the dashboard and mirrored by a
   * webhook): the one just created would charge twice, so it is cancelled at once.
   */
  private async cancelOrphan(stripeSubscriptionId: string): Promise<void> {
    this.logger.error(
      { stripeSubscriptionId },
      'Stripe created a subscription while another one is live for the organization; cancelling it',
    );
    await this.stripe.call('subscriptions.cancel(orphan)', (stripe) =>
      stripe.subscriptions.cancel(
        stripeSubscriptionId,
        {},
        { idempotencyKey: `subscription-cancel-orphan:${stripeSubscriptionId}` },
      ),
    );
  }

  /** Pauses collection (invoices voided); repeating it answers the same state without a call. */
  async suspend(caller: CallerContext): Promise<SubscriptionDto> {
    this.stripe.assertConfigured();
    const { organizationId } = caller;
    const row = await this.billing.findLiveSubscription(organizationId);
    if (!row) throw AppError.notFound('Subscription');
    if (row.collectionPaused) return toSubscriptionResponse(row);
    if (!SUSPENDABLE.has(row.status)) {
      throw new AppError(
        'subscription_not_active',
        `A subscription in status ${row.status} cannot be suspended`,
      );
    }
    await this.updateAtStripe(caller, row, 'suspend', { behavior: 'void' });
    return this.subscriptionResponse(row.stripeSubscriptionId);
  }

  /** Clears the pause; resuming a subscription that is not suspended changes nothing. */
  async resume(caller: CallerContext): Promise<SubscriptionDto> {
    this.stripe.assertConfigured();
    const { organizationId } = caller;
    const row = await this.billing.findLiveSubscription(organizationId);
    if (!row) throw AppError.notFound('Subscription');
    if (!row.collectionPaused) return toSubscriptionResponse(row);
    await this.updateAtStripe(caller, row, 'resume', '');
    return this.subscriptionResponse(row.stripeSubscriptionId);
  }

  /**
   * The key carries the row's revision: a retry of the same request (nothing applied meanwhile)
   * replays, while a later suspend after a resume is a new operation with a new key.
   */
  private async updateAtStripe(
    caller: CallerContext,
    row: BillingSubscription,
    action: 'suspend' | 'resume',
    pauseCollection: { behavior: 'void' } | '',
  ): Promise<void> {
    const subscription = await this.stripe.call(`subscriptions.update(${action})`, (stripe) =>
      stripe.subscriptions.update(
        row.stripeSubscriptionId,
        { pause_collection: pauseCollection },
        { idempotencyKey: `subscription-${action}:${row.stripeSubscriptionId}:${row.revision}` },
      ),
    );
    await this.database.transaction(async (manager) => {
      const now = this.clock.now();
      await this.billing.applySubscriptionSnapshot(
        manager,
        caller.organizationId,
        snapshotOf(subscription),
        providerTimeOf(subscription, now),
        true,
        now,
      );
      await this.audit.record(manager, caller, {
        organizationId: caller.organizationId,
        action: action === 'suspend' ? 'subscription.suspended' : 'subscription.resumed',
        target: { type: 'subscription', id: row.stripeSubscriptionId },
      });
    });
  }

  /**
   * The organization's Stripe customer, created exactly once: concurrent first needs send the
   * same idempotency key (Stripe answers both with one customer) and the primary key on
   * organization_id keeps one row.
   */
  async ensureCustomer(organizationId: string): Promise<BillingCustomer> {
    const existing = await this.billing.findCustomer(organizationId);
    if (existing) return existing;
    const customer = await this.stripe.call('customers.create', (stripe) =>
      stripe.customers.create(
        { metadata: { organization_id: organizationId } },
        { idempotencyKey: `customer-create:${organizationId}` },
      ),
    );
    return this.billing.insertCustomerIfAbsent(organizationId, customer.id);
  }

  private async subscriptionResponse(stripeSubscriptionId: string): Promise<SubscriptionDto> {
    const row = await this.billing.getSubscription(stripeSubscriptionId);
    return toSubscriptionResponse(row);
  }
}
