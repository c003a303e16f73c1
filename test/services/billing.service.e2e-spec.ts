import type { TestingModule } from '@nestjs/testing';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import { BillingWebhooksService } from '../../src/billing/billing-webhooks.service';
import { BillingModule } from '../../src/billing/billing.module';
import { BillingService } from '../../src/billing/billing.service';
import { relationshipMeterEventStep } from '../../src/billing/meter-events.step';
import { MeterEventsWorker } from '../../src/billing/meter-events.worker';
import type { UserCaller } from '../../src/common/auth/caller';
import { Database } from '../../src/database/database';
import { sql, withEntries } from '../../src/database/sql';
import { monthStartOf, relationshipActivityStep } from '../../src/usage/usage.steps';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { FakeStripe, stripeEvent } from '../support/fake-stripe';
import { moduleAlone } from '../support/module-alone';

const WEBHOOK_SECRET = 'whsec_service_current';
const OLD_WEBHOOK_SECRET = 'whsec_service_previous';
const METER_EVENT_NAME = 'active_relationships';

const nowSeconds = () => Math.floor(Date.now() / 1000);
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * The billing module alone on a real PostgreSQL, without HTTP ("medium" spec): BillingService
 * (customer, subscription, suspend/resume, invoices, usage), BillingWebhooksService (signed events
 * applied once and never backwards) and the meter events outbox with its worker, called directly,
 * the official SDK talking to the fake Stripe of test/support (docs/billing.md, contract §12, §23).
 */
describe('Billing services (real database, fake Stripe)', () => {
  let fake: FakeStripe;
  let moduleRef: TestingModule;
  let billing: BillingService;
  let webhooks: BillingWebhooksService;
  let worker: MeterEventsWorker;
  let database: Database;
  let factory: Factory;

  beforeAll(async () => {
    fake = await FakeStripe.start();
    moduleRef = await moduleAlone([BillingModule], {
      STRIPE_SECRET_KEY: 'sk_test_service_0123456789',
      STRIPE_API_BASE: fake.baseUrl,
      STRIPE_WEBHOOK_SECRET: `${WEBHOOK_SECRET}, ${OLD_WEBHOOK_SECRET}`,
      STRIPE_TIMEOUT_MS: '2000',
      STRIPE_MAX_NETWORK_RETRIES: '0',
      STRIPE_METER_EVENT_NAME: METER_EVENT_NAME,
      STRIPE_TOKEN_METER_EVENT_NAME: undefined,
      // The spec runs the worker itself (a command's module starts no background job anyway).
      STRIPE_METER_POLL_INTERVAL_MS: '600000',
      STRIPE_METER_RETRY_BASE_MS: '60000',
    });
    billing = moduleRef.get(BillingService);
    webhooks = moduleRef.get(BillingWebhooksService);
    worker = moduleRef.get(MeterEventsWorker);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterEach(() => fake.clearFaults());
  afterAll(async () => {
    await moduleRef?.close();
    await fake?.close();
  });

  async function admin(): Promise<UserCaller> {
    const organizationId = await factory.organization();
    return { kind: 'user', organizationId, userId: randomUUID(), scopes: ['admin'] };
  }

  /** An organization with a live subscription started through the service. */
  async function subscribed(price = 'price_basic') {
    const caller = await admin();
    const subscription = await billing.createSubscription(caller, price);
    const customer = await customerOf(caller.organizationId);
    return { caller, subscription, customer: customer! };
  }

  async function customerOf(organizationId: string): Promise<string | undefined> {
    const rows = await database.rows<{ stripe_customer_id: string }>(
      sql`SELECT stripe_customer_id FROM billing_customers WHERE organization_id = ${organizationId}`,
    );
    expect(rows.length).toBeLessThanOrEqual(1);
    return rows[0]?.stripe_customer_id;
  }

  async function mirrored(stripeSubscriptionId: string) {
    return database.row<{ organization_id: string; status: string; revision: number }>(
      sql`SELECT organization_id, status, revision FROM billing_subscriptions
           WHERE stripe_subscription_id = ${stripeSubscriptionId}`,
    );
  }

  async function eventRows(eventId: string) {
    return database.rows<{ outcome: string }>(
      sql`SELECT outcome FROM billing_events WHERE id = ${eventId}`,
    );
  }

  /** Delivers an event as Stripe would: the raw bytes and their Stripe-Signature header. */
  function deliver(event: unknown, secret = WEBHOOK_SECRET): Promise<void> {
    const payload = JSON.stringify(event);
    const signature = Stripe.webhooks.generateTestHeaderString({ payload, secret });
    return webhooks.receive(Buffer.from(payload), signature);
  }

  /** Stripe's subscription as the fake holds it, as a webhook payload would carry it. */
  const atStripe = (id: string) => structuredClone(fake.subscriptions.get(id)!);

  const subscriptionCalls = (id: string) =>
    fake.requestsTo('POST', new RegExp(`^/v1/subscriptions/${id}$`));

  describe('the Stripe customer', () => {
    it('is created once for concurrent first needs, with the organization’s key; a read creates none', async () => {
      const { organizationId } = await admin();
      // Reading invoices never needs a customer.
      await expect(billing.listInvoices(organizationId, 10)).resolves.toEqual({
        data: [],
        has_more: false,
      });
      expect(fake.customersOf(organizationId)).toEqual([]);

      const intents = await Promise.all(
        Array.from({ length: 4 }, () => billing.createSetupIntent(organizationId)),
      );

      expect(fake.customersOf(organizationId)).toHaveLength(1);
      const customer = fake.customersOf(organizationId)[0].id as string;
      expect(await customerOf(organizationId)).toBe(customer);
      const creates = fake
        .requestsTo('POST', /^\/v1\/customers$/)
        .filter((request) => request.rawBody.includes(organizationId));
      expect(creates.length).toBeGreaterThanOrEqual(1);
      for (const create of creates) {
        expect(create.idempotencyKey).toBe(`customer-create:${organizationId}`);
      }
      // Every SetupIntent is for that one customer; without a client key, each is a new one.
      const ids = intents.map((intent) => intent.setup_intent_id);
      expect(new Set(ids).size).toBe(4);
      for (const id of ids) expect(fake.setupIntents.get(id)?.customer).toBe(customer);
      // A client's Idempotency-Key makes its retry answer the same SetupIntent.
      const first = await billing.createSetupIntent(organizationId, 'client-key-1');
      await expect(billing.createSetupIntent(organizationId, 'client-key-1')).resolves.toEqual(
        first,
      );
      expect(fake.customersOf(organizationId)).toHaveLength(1);
    });
  });

  describe('subscriptions', () => {
    it('refuses an unknown or archived price before the create, so the next start is not locked out', async () => {
      const caller = await admin();
      const creates = () =>
        fake
          .requestsTo('POST', /^\/v1\/subscriptions$/)
          .filter((request) => JSON.stringify(request.form).includes(caller.organizationId));
      for (const price of ['price_missing1', 'price_archived_2019']) {
        await expect(billing.createSubscription(caller, price)).rejects.toMatchObject({
          code: 'validation_failed',
          details: [{ field: 'price_id', problem: 'is not a usable price' }],
        });
      }
      expect(creates()).toEqual([]);
      // The start's key was never used: the next start with a real price goes through.
      await expect(billing.createSubscription(caller, 'price_basic')).resolves.toMatchObject({
        status: 'active',
        price_id: 'price_basic',
      });
      expect(creates().map((request) => request.idempotencyKey)).toEqual([
        `subscription-create:${caller.organizationId}:0`,
      ]);
    });

    it('starts one subscription for concurrent starts with one price; another start answers 409', async () => {
      const caller = await admin();
      const started = await Promise.all(
        Array.from({ length: 3 }, () => billing.createSubscription(caller, 'price_basic')),
      );

      expect(new Set(started.map((subscription) => subscription.id)).size).toBe(1);
      expect(started[0]).toMatchObject({ status: 'active', price_id: 'price_basic' });
      const customer = (await customerOf(caller.organizationId))!;
      expect(fake.subscriptionsOf(customer)).toHaveLength(1);
      const [{ count }] = await database.rows<{ count: number }>(
        sql`SELECT count(*)::int AS count FROM billing_subscriptions
             WHERE organization_id = ${caller.organizationId}`,
      );
      expect(count).toBe(1);

      // One is live: a start with another price is refused before it reaches Stripe.
      const creates = fake.requestsTo('POST', /^\/v1\/subscriptions$/).length;
      await expectAppError(billing.createSubscription(caller, 'price_pro'), 'subscription_exists');
      expect(fake.requestsTo('POST', /^\/v1\/subscriptions$/)).toHaveLength(creates);
      await expect(billing.getSubscription(caller.organizationId)).resolves.toMatchObject({
        id: started[0].id,
        status: 'active',
      });
    });

    it('suspends and resumes at Stripe, repeats without a call, and a suspend after a resume is new', async () => {
      const { caller, subscription } = await subscribed();
      const id = subscription.id;

      await expect(billing.suspend(caller)).resolves.toMatchObject({ id, status: 'suspended' });
      expect(fake.subscriptions.get(id)?.pause_collection).toEqual({
        behavior: 'void',
        resumes_at: null,
      });
      await expect(billing.suspend(caller)).resolves.toMatchObject({ status: 'suspended' });
      expect(subscriptionCalls(id)).toHaveLength(1);
      // Suspended is still live: no second subscription meanwhile.
      await expectAppError(billing.createSubscription(caller, 'price_pro'), 'subscription_exists');

      await expect(billing.resume(caller)).resolves.toMatchObject({ id, status: 'active' });
      expect(fake.subscriptions.get(id)?.pause_collection).toBeNull();
      await expect(billing.resume(caller)).resolves.toMatchObject({ status: 'active' });
      expect(subscriptionCalls(id)).toHaveLength(2);

      // A new operation, not a replay of the first suspend: Stripe pauses collection again.
      await expect(billing.suspend(caller)).resolves.toMatchObject({ status: 'suspended' });
      expect(fake.subscriptions.get(id)?.pause_collection).not.toBeNull();
      const keys = subscriptionCalls(id).map((request) => request.idempotencyKey);
      expect(keys).toHaveLength(3);
      expect(new Set(keys).size).toBe(3);
      await expect(billing.getSubscription(caller.organizationId)).resolves.toMatchObject({
        status: 'suspended',
      });
    });

    it('refuses suspend/resume without a live subscription, and suspend from a non-suspendable status', async () => {
      const never = await admin();
      await expectAppError(billing.getSubscription(never.organizationId), 'not_found');
      await expectAppError(billing.suspend(never), 'not_found');
      await expectAppError(billing.resume(never), 'not_found');

      const incomplete = await admin();
      const stripeId = `sub_incomplete${randomBytes(6).toString('hex')}`;
      await database.rows(
        sql`INSERT INTO billing_subscriptions (stripe_subscription_id, price_id, status,
                                               stripe_status, collection_paused,
                                               cancel_at_period_end, provider_updated_at,
                                               organization_id)
            VALUES (${stripeId}, 'price_basic', 'incomplete', 'incomplete', false, false,
                    now(), ${incomplete.organizationId})`,
      );
      await expectAppError(billing.suspend(incomplete), 'subscription_not_active');
      expect(subscriptionCalls(stripeId)).toEqual([]);
      expect((await mirrored(stripeId))?.status).toBe('incomplete');
    });

    it('never lets an older event undo a newer state; a cancellation frees the organization to start again', async () => {
      const { caller, subscription } = await subscribed();
      const id = subscription.id;
      await billing.suspend(caller);
      const suspended = (await mirrored(id))!;

      // The state from before the suspension, delivered late: recorded, not applied.
      const before = { ...atStripe(id), pause_collection: null, status: 'active' };
      const late = stripeEvent('customer.subscription.updated', before, nowSeconds() - 30);
      await deliver(late);
      expect(await eventRows(late.id)).toEqual([{ outcome: 'stale' }]);
      expect(await mirrored(id)).toEqual(suspended);
      await expect(billing.getSubscription(caller.organizationId)).resolves.toMatchObject({
        status: 'suspended',
      });

      // A newer one is applied: the subscription ended, and reads as the latest ended one.
      const ended = { ...atStripe(id), status: 'canceled' };
      await deliver(stripeEvent('customer.subscription.deleted', ended, nowSeconds() + 5));
      await expect(billing.getSubscription(caller.organizationId)).resolves.toMatchObject({
        id,
        status: 'canceled',
      });
      await expectAppError(billing.suspend(caller), 'not_found');

      // A new start is a new operation at Stripe (another key), not the first start replayed.
      const again = await billing.createSubscription(caller, 'price_pro');
      expect(again.id).not.toBe(id);
      expect(again).toMatchObject({ status: 'active', price_id: 'price_pro' });
      const keys = fake
        .requestsTo('POST', /^\/v1\/subscriptions$/)
        .filter(
          (request) =>
            request.form.metadata &&
            JSON.stringify(request.form.metadata).includes(caller.organizationId),
        )
        .map((request) => request.idempotencyKey);
      expect(keys).toEqual([
        `subscription-create:${caller.organizationId}:0`,
        `subscription-create:${caller.organizationId}:1`,
      ]);
      await expect(billing.getSubscription(caller.organizationId)).resolves.toMatchObject({
        id: again.id,
      });
    });
  });

  describe('webhooks', () => {
    it('refuses an invoice whose subscription is not mirrored yet, so Stripe delivers it again', async () => {
      // A subscription made outside the service (Stripe's dashboard) for a customer of ours: its
      // invoice.paid can arrive before customer.subscription.created.
      const { subscription } = await subscribed();
      const caller = await admin();
      await billing.createSetupIntent(caller.organizationId);
      const customer = (await customerOf(caller.organizationId))!;
      const dashboard = { ...atStripe(subscription.id), id: `sub_${randomUUID()}`, customer };
      const invoice = {
        id: `in_${randomUUID()}`,
        object: 'invoice',
        customer,
        parent: {
          type: 'subscription_details',
          subscription_details: { subscription: dashboard.id },
        },
      };
      const paid = stripeEvent('invoice.paid', invoice, nowSeconds());
      await expectAppError(deliver(paid), 'service_unavailable');
      expect(await eventRows(paid.id)).toEqual([]);

      await deliver(stripeEvent('customer.subscription.created', dashboard, nowSeconds() - 1));
      expect(await mirrored(dashboard.id)).toMatchObject({
        organization_id: caller.organizationId,
      });
      await deliver(paid);
      expect(await eventRows(paid.id)).toEqual([{ outcome: 'applied' }]);
      const [held] = await database.rows<{
        latest_invoice_id: string;
        latest_invoice_status: string;
      }>(
        sql`SELECT latest_invoice_id, latest_invoice_status FROM billing_subscriptions
             WHERE stripe_subscription_id = ${dashboard.id}`,
      );
      expect(held).toEqual({ latest_invoice_id: invoice.id, latest_invoice_status: 'paid' });

      // A second live subscription of an organization is never mirrored: its invoices are
      // ignored, not deferred (each delivery would fail until Stripe gave up).
      const second = { ...dashboard, id: `sub_${randomUUID()}` };
      await deliver(stripeEvent('customer.subscription.created', second, nowSeconds()));
      expect(await mirrored(second.id)).toBeUndefined();
      const secondPaid = stripeEvent(
        'invoice.paid',
        {
          ...invoice,
          id: `in_${randomUUID()}`,
          parent: { ...invoice.parent, subscription_details: { subscription: second.id } },
        },
        nowSeconds(),
      );
      await deliver(secondPaid);
      expect(await eventRows(secondPaid.id)).toEqual([{ outcome: 'ignored' }]);

      // Not our customer's: acknowledged and ignored, as its subscription events are.
      const foreign = {
        ...invoice,
        id: `in_${randomUUID()}`,
        customer: 'cus_unknown',
        parent: { ...invoice.parent, subscription_details: { subscription: 'sub_unknown' } },
      };
      const theirs = stripeEvent('invoice.paid', foreign, nowSeconds());
      await deliver(theirs);
      expect(await eventRows(theirs.id)).toEqual([{ outcome: 'ignored' }]);
    });

    it('applies a signed event once, however often and concurrently it is delivered', async () => {
      const { subscription } = await subscribed();
      const id = subscription.id;
      const before = (await mirrored(id))!;
      const event = stripeEvent(
        'customer.subscription.updated',
        { ...atStripe(id), status: 'past_due' },
        nowSeconds() + 5,
      );

      // Signed with the previous secret (rotation): it verifies.
      await Promise.all([deliver(event, OLD_WEBHOOK_SECRET), deliver(event), deliver(event)]);
      await deliver(event);

      expect(await mirrored(id)).toMatchObject({
        status: 'past_due',
        revision: before.revision + 1,
      });
      expect(await eventRows(event.id)).toEqual([{ outcome: 'applied' }]);

      // A payload that does not verify is refused and leaves no trace.
      const forged = stripeEvent(
        'customer.subscription.updated',
        { ...atStripe(id), status: 'canceled' },
        nowSeconds() + 10,
      );
      await expectAppError(deliver(forged, 'whsec_someone_else'), 'invalid_signature');
      await expectAppError(
        webhooks.receive(Buffer.from(JSON.stringify(forged)), undefined),
        'invalid_signature',
      );
      expect(await eventRows(forged.id)).toEqual([]);
      expect((await mirrored(id))?.status).toBe('past_due');
    });
  });

  describe('tenancy', () => {
    it('never reads or changes one organization’s billing through another’s id', async () => {
      const mine = await subscribed();
      fake.addInvoice(mine.customer);
      const theirs = await admin();
      await billing.createSetupIntent(theirs.organizationId);
      const theirCustomer = (await customerOf(theirs.organizationId))!;
      const calls = subscriptionCalls(mine.subscription.id).length;

      await expectAppError(billing.getSubscription(theirs.organizationId), 'not_found');
      await expectAppError(billing.suspend(theirs), 'not_found');
      await expectAppError(billing.resume(theirs), 'not_found');
      await expect(billing.listInvoices(theirs.organizationId, 10)).resolves.toEqual({
        data: [],
        has_more: false,
      });
      expect((await billing.listInvoices(mine.caller.organizationId, 10)).data).toHaveLength(1);

      // An event naming my subscription under their customer does not touch my subscription.
      const crossed = stripeEvent(
        'customer.subscription.updated',
        { ...atStripe(mine.subscription.id), customer: theirCustomer, status: 'canceled' },
        nowSeconds() + 5,
      );
      await deliver(crossed);
      expect(await mirrored(mine.subscription.id)).toMatchObject({
        organization_id: mine.caller.organizationId,
        status: 'active',
      });
      await expectAppError(billing.getSubscription(theirs.organizationId), 'not_found');
      expect(subscriptionCalls(mine.subscription.id)).toHaveLength(calls);
    });
  });

  describe('meter events', () => {
    it('queues one event per relationship new in the month (customers only) and sends each once', async () => {
      const metered = await admin();
      await billing.createSetupIntent(metered.organizationId);
      const customer = (await customerOf(metered.organizationId))!;
      const unmetered = await admin();
      const [p1, p2] = [
        await factory.personality(metered.organizationId),
        await factory.personality(metered.organizationId),
      ];
      const ada = await factory.endUser(metered.organizationId, 'ada');
      const bob = await factory.endUser(unmetered.organizationId, 'bob');
      const p3 = await factory.personality(unmetered.organizationId);

      /** What a stored reply's statement does for the relationship (usage + billing steps). */
      const reply = (organizationId: string, endUserId: string, personalityId: string) => {
        const at = new Date();
        const activity = relationshipActivityStep({ organizationId, endUserId, personalityId, at });
        return database.rows(
          withEntries(
            [activity, relationshipMeterEventStep(activity, { eventName: METER_EVENT_NAME, at })],
            sql`SELECT 1`,
          ),
        );
      };
      await reply(metered.organizationId, ada, p1);
      await Promise.all([
        reply(metered.organizationId, ada, p1),
        reply(metered.organizationId, ada, p1),
      ]);
      await reply(metered.organizationId, ada, p2);
      await reply(unmetered.organizationId, bob, p3);

      const month = monthStartOf(new Date()).slice(0, 7);
      await expect(billing.usageOf(metered.organizationId)).resolves.toMatchObject({
        month,
        active_relationships: 2,
        meter_events_pending: 2,
      });
      await expect(billing.usageOf(unmetered.organizationId)).resolves.toMatchObject({
        active_relationships: 1,
        meter_events_pending: 0,
      });

      // Stripe fails the first attempt: that event waits for its backoff, the other goes.
      fake.fail('POST', /^\/v1\/billing\/meter_events$/, 500, 1);
      await worker.runOnce();
      const sent = () => fake.meterEvents.filter((e) => e.payload.stripe_customer_id === customer);
      expect(sent()).toHaveLength(1);
      await worker.runOnce();
      expect(sent()).toHaveLength(1);
      expect((await billing.usageOf(metered.organizationId)).meter_events_pending).toBe(1);

      // Its retry comes due: sent once, and nothing delivered is ever sent again. A second in the
      // past: the worker reads the time in milliseconds, the database's now() has microseconds,
      // and both runs can fall in the millisecond the update began.
      await database.rows(
        sql`UPDATE meter_events SET next_attempt_at = now() - interval '1 second'
             WHERE organization_id = ${metered.organizationId} AND status = 'pending'`,
      );
      await worker.runOnce();
      await worker.runOnce();
      const identifiers = [p1, p2].map((personality) =>
        sha256(`${metered.organizationId}:${month}:${ada}:${personality}`),
      );
      expect(
        sent()
          .map((e) => e.identifier)
          .sort(),
      ).toEqual([...identifiers].sort());
      for (const event of sent()) {
        expect(event).toMatchObject({
          event_name: METER_EVENT_NAME,
          payload: { stripe_customer_id: customer, value: '1' },
        });
      }
      expect(fake.duplicateMeterEvents).toBe(0);
      const attempts = fake.requestsTo('POST', /^\/v1\/billing\/meter_events$/);
      for (const identifier of identifiers) {
        const keys = attempts
          .filter((request) => request.form.identifier === identifier)
          .map((request) => request.idempotencyKey);
        expect(new Set(keys)).toEqual(new Set([`meter-event:${identifier}`]));
      }
      expect((await billing.usageOf(metered.organizationId)).meter_events_pending).toBe(0);
    });
  });
});
