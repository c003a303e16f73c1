import { ManualClock } from '../src/common/time/clock';
import { Database } from '../src/database/database';
import type { BillingConfig } from '../src/config/billing.config';
import type { PinoLogger } from 'nestjs-pino';
import { randomBytes } from 'node:crypto';
import type Stripe from 'stripe';
import { DataSource } from 'typeorm';
import { BillingWebhooksService } from '../src/billing/billing-webhooks.service';
import { BillingRepository } from '../src/billing/billing.repository';
import { Organization } from '../src/organizations/entities/organization.entity';
import { StripeGateway } from '../src/billing/stripe-gateway';
import { buildDataSourceOptions } from '../src/database/data-source-options';
import { runMigrationsExclusively } from '../src/database/run-migrations';
import type { MetricsService } from '../src/metrics/metrics.service';
import { FakeStripe, FakeSubscription } from './support/fake-stripe';

/**
 * The webhook handler's rules (ordering by Stripe's clock, each event applied once) as a service
 * spec: the service and its repository on the run's real PostgreSQL, Stripe's API played by the
 * fake, no HTTP and no signatures (test/billing.e2e-spec.ts covers those).
 */

const quietLogger = (): PinoLogger =>
  ({ setContext: () => undefined, info: jest.fn(), warn: jest.fn(), error: jest.fn() }) as never;

const noMetrics = { counter: () => ({ inc: () => undefined }) } as unknown as MetricsService;

/** Event times in the recent past: a re-read from Stripe (stamped now) is newer than they are. */
const secondsAgo = (seconds: number) => Math.floor(Date.now() / 1000) - seconds;

const id = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`;

function event(type: string, object: object, created: number): Stripe.Event {
  return { id: id('evt'), object: 'event', type, created, data: { object } } as never;
}

describe('BillingWebhooksService (real database, fake Stripe)', () => {
  let fake: FakeStripe;
  let db: DataSource;
  let repository: BillingRepository;
  let webhooks: BillingWebhooksService;
  const clock = new ManualClock();

  beforeAll(async () => {
    fake = await FakeStripe.start();
    db = new DataSource(buildDataSourceOptions({ url: process.env.DATABASE_URL!, poolSize: 4 }));
    await db.initialize();
    await runMigrationsExclusively(db);
    const api = new URL(fake.baseUrl);
    const config = {
      stripeSecretKey: 'sk_test_fake_0123456789',
      stripeApi: { protocol: 'http', host: api.hostname, port: Number(api.port) },
      webhookSecrets: ['whsec_unused'],
      timeoutMs: 2000,
      maxNetworkRetries: 0,
    } as BillingConfig;
    const database = new Database(db);
    repository = new BillingRepository(database);
    webhooks = new BillingWebhooksService(
      config,
      new StripeGateway(config, quietLogger(), noMetrics),
      database,
      repository,
      clock,
      quietLogger(),
    );
  });
  afterEach(() => fake.clearFaults());
  afterAll(async () => {
    await db.destroy();
    await fake.close();
  });

  /** An organization with a Stripe customer, and the payload of a subscription of theirs. */
  async function customerWithSubscription() {
    const organization = await db.manager.save(Organization, { name: 'Webhook spec' });
    const customer = await repository.insertCustomerIfAbsent(organization.id, id('cus'));
    const subscription = {
      id: id('sub'),
      object: 'subscription',
      customer: customer.stripeCustomerId,
      status: 'active',
      pause_collection: null,
      cancel_at_period_end: false,
      created: 1_800_000_000,
      metadata: {},
      default_payment_method: null,
      items: {
        object: 'list',
        data: [{ id: id('si'), price: { id: 'price_basic' }, current_period_end: 1_802_000_000 }],
      },
    } satisfies FakeSubscription;
    return { organization, customer, subscription };
  }

  async function outcomeOf(eventId: string): Promise<string | undefined> {
    const rows: Array<{ outcome: string }> = await db.query(
      'SELECT outcome FROM billing_events WHERE id = $1',
      [eventId],
    );
    return rows[0]?.outcome;
  }

  describe('ordering (Stripe clock)', () => {
    it('ignores an older event arriving after a newer one, and records it as stale', async () => {
      const { subscription } = await customerWithSubscription();
      const calls = fake.requests.length;
      const base = secondsAgo(3600);
      const created = event('customer.subscription.created', subscription, base);
      const newer = event(
        'customer.subscription.updated',
        { ...subscription, status: 'past_due' },
        base + 20,
      );
      const older = event(
        'customer.subscription.updated',
        { ...subscription, pause_collection: { behavior: 'void', resumes_at: null } },
        base + 10,
      );

      await expect(webhooks.handle(created)).resolves.toBe('applied');
      await expect(webhooks.handle(newer)).resolves.toBe('applied');
      const before = await repository.getSubscription(subscription.id);
      await expect(webhooks.handle(older)).resolves.toBe('stale');

      const after = await repository.getSubscription(subscription.id);
      expect(after.status).toBe('past_due');
      expect(after.collectionPaused).toBe(false);
      expect(after.providerUpdatedAt).toEqual(new Date((base + 20) * 1000));
      expect(after.revision).toBe(before.revision);
      expect(await outcomeOf(older.id)).toBe('stale');
      expect(fake.requests).toHaveLength(calls);
    });

    it('announces an applied snapshot as subscription.updated, due at the Clock’s time; a stale one announces nothing', async () => {
      const { organization, subscription } = await customerWithSubscription();
      await db.query(
        `INSERT INTO webhook_endpoints (organization_id, url, events, secret)
         VALUES ($1, 'https://example.com/hook', ARRAY['subscription.updated'], 'whsec_unused')`,
        [organization.id],
      );
      const base = secondsAgo(1800);
      await expect(
        webhooks.handle(event('customer.subscription.created', subscription, base)),
      ).resolves.toBe('applied');
      await expect(
        webhooks.handle(
          event(
            'customer.subscription.updated',
            { ...subscription, status: 'past_due' },
            base - 10,
          ),
        ),
      ).resolves.toBe('stale');

      const announced: unknown[] = await db.query(
        `SELECT e.type, e.data, a.attempt, a.next_attempt_at
           FROM webhook_events e JOIN webhook_delivery_attempts a ON a.event_id = e.id
          WHERE e.organization_id = $1`,
        [organization.id],
      );
      expect(announced).toEqual([
        {
          type: 'subscription.updated',
          data: {
            id: subscription.id,
            status: 'active',
            price_id: 'price_basic',
            current_period_end: new Date(1_802_000_000 * 1000).toISOString(),
            cancel_at_period_end: false,
          },
          attempt: 1,
          next_attempt_at: clock.now(),
        },
      ]);
    });

    it('re-reads the subscription from Stripe when an event ties with the state held', async () => {
      const { subscription } = await customerWithSubscription();
      const at = secondsAgo(3000);
      await expect(
        webhooks.handle(event('customer.subscription.created', subscription, at)),
      ).resolves.toBe('applied');
      fake.subscriptions.set(subscription.id, { ...subscription, status: 'canceled' });
      const rereads = fake.requestsTo('GET', /^\/v1\/subscriptions\//).length;

      const tie = event(
        'customer.subscription.updated',
        { ...subscription, status: 'past_due' },
        at,
      );
      await expect(webhooks.handle(tie)).resolves.toBe('applied');

      expect(fake.requestsTo('GET', /^\/v1\/subscriptions\//)).toHaveLength(rereads + 1);
      expect((await repository.getSubscription(subscription.id)).status).toBe('canceled');
    });

    it('keeps the newest invoice outcome; within one second `paid` wins', async () => {
      const { subscription } = await customerWithSubscription();
      const base = secondsAgo(2400);
      await webhooks.handle(event('customer.subscription.created', subscription, base));
      const invoice = {
        id: id('in'),
        object: 'invoice',
        customer: subscription.customer,
        parent: {
          type: 'subscription_details',
          subscription_details: { subscription: subscription.id },
        },
      };

      await expect(webhooks.handle(event('invoice.paid', invoice, base + 5))).resolves.toBe(
        'applied',
      );
      await expect(
        webhooks.handle(event('invoice.payment_failed', invoice, base + 2)),
      ).resolves.toBe('stale');
      await expect(
        webhooks.handle(event('invoice.payment_failed', invoice, base + 5)),
      ).resolves.toBe('stale');
      const row = await repository.getSubscription(subscription.id);
      expect(row.latestInvoiceStatus).toBe('paid');
      expect(row.latestInvoiceAt).toEqual(new Date((base + 5) * 1000));

      await expect(
        webhooks.handle(event('invoice.payment_failed', invoice, base + 6)),
      ).resolves.toBe('applied');
      await expect(webhooks.handle(event('invoice.paid', invoice, base + 6))).resolves.toBe(
        'applied',
      );
      expect((await repository.getSubscription(subscription.id)).latestInvoiceStatus).toBe('paid');
    });

    it('reads the subscription of an invoice sent by an API version before basil', async () => {
      const { subscription } = await customerWithSubscription();
      const base = secondsAgo(2400);
      await webhooks.handle(event('customer.subscription.created', subscription, base));
      const invoice = {
        id: id('in'),
        object: 'invoice',
        customer: subscription.customer,
        subscription: subscription.id,
      };
      await expect(
        webhooks.handle(event('invoice.payment_failed', invoice, base + 5)),
      ).resolves.toBe('applied');
      expect((await repository.getSubscription(subscription.id)).latestInvoiceStatus).toBe(
        'payment_failed',
      );
    });

    it('never lets an older saved payment method replace a newer one', async () => {
      const { organization, customer } = await customerWithSubscription();
      const intent = (paymentMethod: string) => ({
        id: id('seti'),
        object: 'setup_intent',
        customer: customer.stripeCustomerId,
        payment_method: paymentMethod,
        status: 'succeeded',
      });
      const base = secondsAgo(1800);
      await expect(
        webhooks.handle(event('setup_intent.succeeded', intent('pm_new'), base + 10)),
      ).resolves.toBe('applied');
      await expect(
        webhooks.handle(event('setup_intent.succeeded', intent('pm_old'), base)),
      ).resolves.toBe('stale');
      const held = await repository.findCustomer(organization.id);
      expect(held?.defaultPaymentMethodId).toBe('pm_new');
    });
  });

  describe('idempotency (event ids)', () => {
    it('applies the same event once: a second delivery changes nothing', async () => {
      const { subscription } = await customerWithSubscription();
      const base = secondsAgo(1200);
      await webhooks.handle(event('customer.subscription.created', subscription, base));
      const once = event(
        'customer.subscription.updated',
        { ...subscription, cancel_at_period_end: true },
        base + 10,
      );

      await expect(webhooks.handle(once)).resolves.toBe('applied');
      const applied = await repository.getSubscription(subscription.id);
      await expect(webhooks.handle(once)).resolves.toBe('duplicate');

      const after = await repository.getSubscription(subscription.id);
      expect(after.revision).toBe(applied.revision);
      expect(after.updatedAt).toEqual(applied.updatedAt);
      expect(after.cancelAtPeriodEnd).toBe(true);
      expect(await outcomeOf(once.id)).toBe('applied');
    });

    it('applies an event delivered twice at once exactly once', async () => {
      const { subscription } = await customerWithSubscription();
      const base = secondsAgo(600);
      await webhooks.handle(event('customer.subscription.created', subscription, base));
      const before = await repository.getSubscription(subscription.id);
      const twice = event(
        'customer.subscription.updated',
        { ...subscription, status: 'past_due' },
        base + 10,
      );

      const outcomes = await Promise.all([webhooks.handle(twice), webhooks.handle(twice)]);

      expect(outcomes.sort()).toEqual(['applied', 'duplicate']);
      const after = await repository.getSubscription(subscription.id);
      expect(after.revision).toBe(before.revision + 1);
      expect(after.status).toBe('past_due');
      const rows = await db.query('SELECT outcome FROM billing_events WHERE id = $1', [twice.id]);
      expect(rows).toEqual([{ outcome: 'applied' }]);
    });

    it('takes a redelivery that raced the first past the duplicate check for a duplicate, not a tie', async () => {
      const { subscription } = await customerWithSubscription();
      const updated = event(
        'customer.subscription.updated',
        { ...subscription, status: 'past_due' },
        secondsAgo(300),
      );
      await expect(webhooks.handle(updated)).resolves.toBe('applied');
      const calls = fake.requests.length;
      // The second delivery checked before the first committed; by the time it reads the held
      // time, that time is the first delivery's, its own event's.
      jest.spyOn(repository, 'isEventRecorded').mockResolvedValueOnce(false);

      await expect(webhooks.handle(updated)).resolves.toBe('duplicate');
      expect(fake.requests.length).toBe(calls);
    });

    it('records an event for an unknown customer as ignored, so a redelivery is a duplicate', async () => {
      const stranger = {
        id: id('sub'),
        object: 'subscription',
        customer: id('cus'),
        status: 'active',
        pause_collection: null,
        cancel_at_period_end: false,
        items: { data: [] },
      };
      const unknown = event('customer.subscription.created', stranger, secondsAgo(60));

      await expect(webhooks.handle(unknown)).resolves.toBe('ignored');
      await expect(webhooks.handle(unknown)).resolves.toBe('duplicate');
      expect(await outcomeOf(unknown.id)).toBe('ignored');
      expect(await repository.providerTimeHeld(stranger.id)).toBeNull();
    });
  });
});
