import { randomBytes } from 'node:crypto';
import Stripe from 'stripe';
import { DataSource } from 'typeorm';
import { expectError, expectRequestId } from './support/assertions';
import { FakeStripe, FakeSubscription, stripeEvent } from './support/fake-stripe';
import { tenantWithKey } from './support/identity';
import { createTestApp, TestApp } from './support/test-app';
import { eventually } from './support/wait';

const SECRET_KEY = 'sk_test_fake_0123456789';
const WEBHOOK_SECRET = 'whsec_test_current';
const OLD_WEBHOOK_SECRET = 'whsec_test_previous';
const TIMEOUT_MS = 1000;

type Tenant = Awaited<ReturnType<typeof tenantWithKey>>;

const nowSeconds = () => Math.floor(Date.now() / 1000);

describe('Billing through Stripe (official SDK against a local fake Stripe)', () => {
  let fake: FakeStripe;
  let t: TestApp;
  let db: DataSource;

  beforeAll(async () => {
    fake = await FakeStripe.start();
    t = await createTestApp({
      env: {
        STRIPE_SECRET_KEY: SECRET_KEY,
        STRIPE_API_BASE: fake.baseUrl,
        STRIPE_WEBHOOK_SECRET: `${WEBHOOK_SECRET}, ${OLD_WEBHOOK_SECRET}`,
        STRIPE_TIMEOUT_MS: String(TIMEOUT_MS),
        // What the operator offers; price_missing1 is offered but unknown to Stripe.
        STRIPE_PRICE_IDS: 'price_basic, price_pro,price_missing1',
      },
    });
    db = t.app.get(DataSource);
  });
  afterEach(() => fake.clearFaults());
  afterAll(async () => {
    await t.close();
    await fake.close();
  });

  const admin = () => tenantWithKey(t, ['admin']);

  function deliver(event: unknown, options: { secret?: string; timestamp?: number } = {}) {
    const payload = JSON.stringify(event);
    const header = Stripe.webhooks.generateTestHeaderString({
      payload,
      secret: options.secret ?? WEBHOOK_SECRET,
      timestamp: options.timestamp,
    });
    return t
      .http()
      .post('/v1/billing/webhooks')
      .set('Content-Type', 'application/json')
      .set('Stripe-Signature', header)
      .send(payload);
  }

  async function customerIdOf(organizationId: string): Promise<string> {
    const rows = await db.query(
      'SELECT stripe_customer_id FROM billing_customers WHERE organization_id = $1',
      [organizationId],
    );
    return rows[0].stripe_customer_id;
  }

  async function subscribed(tenant?: Tenant) {
    const owner = tenant ?? (await admin());
    const response = await t
      .http()
      .post('/v1/billing/subscription')
      .set('Authorization', owner.auth)
      .send({ price_id: 'price_basic' });
    expect(response.status).toBe(201);
    return {
      owner,
      subscription: response.body,
      stripe: fake.subscriptions.get(response.body.id)!,
    };
  }

  async function revisionOf(subscriptionId: string): Promise<number> {
    const rows = await db.query(
      'SELECT revision FROM billing_subscriptions WHERE stripe_subscription_id = $1',
      [subscriptionId],
    );
    return rows[0].revision;
  }

  describe('access', () => {
    const endpoints: Array<['get' | 'post', string]> = [
      ['get', '/v1/billing/invoices'],
      ['post', '/v1/billing/payment-methods'],
      ['get', '/v1/billing/subscription'],
      ['post', '/v1/billing/subscription'],
      ['post', '/v1/billing/subscription/suspend'],
      ['post', '/v1/billing/subscription/resume'],
    ];

    it('answers 401 without a credential and 403 to a read_write key', async () => {
      const member = await tenantWithKey(t, ['read_write']);
      for (const [method, path] of endpoints) {
        expectError(await t.http()[method](path), 401, 'unauthenticated');
        expectError(
          await t.http()[method](path).set('Authorization', member.auth).send({}),
          403,
          'insufficient_scope',
        );
      }
      expect(fake.requests).toHaveLength(0);
    });
  });

  describe('payment methods', () => {
    it('creates a SetupIntent for off-session use; the client_secret is never logged or stored', async () => {
      const owner = await admin();
      const response = await t
        .http()
        .post('/v1/billing/payment-methods')
        .set('Authorization', owner.auth);
      expect(response.status).toBe(201);
      expectRequestId(response);
      expect(response.body).toEqual({
        setup_intent_id: expect.stringMatching(/^seti_/),
        client_secret: expect.stringMatching(/^seti_.+_secret_/),
      });
      const intent = fake.setupIntents.get(response.body.setup_intent_id)!;
      const customerId = await customerIdOf(owner.organizationId);
      expect(intent).toMatchObject({ customer: customerId, usage: 'off_session' });
      const [customerCall] = fake
        .requestsTo('POST', /^\/v1\/customers$/)
        .filter(
          (r) =>
            (r.form.metadata as Record<string, string>).organization_id === owner.organizationId,
        );
      expect(customerCall.idempotencyKey).toBe(`customer-create:${owner.organizationId}`);
      const intentCall = fake.requestsTo('POST', /^\/v1\/setup_intents$/).at(-1)!;
      expect(intentCall.idempotencyKey).toMatch(/^setup-intent:/);

      expect(t.logs.text()).not.toContain(response.body.client_secret);
      const stored = await db.query(
        `SELECT count(*)::int AS n FROM billing_customers c
          WHERE c::text LIKE '%' || $1 || '%'`,
        [response.body.client_secret],
      );
      expect(stored[0].n).toBe(0);

      // A second setup reuses the organization's customer.
      const again = await t
        .http()
        .post('/v1/billing/payment-methods')
        .set('Authorization', owner.auth);
      expect(again.status).toBe(201);
      expect(again.body.setup_intent_id).not.toBe(response.body.setup_intent_id);
      expect(fake.customersOf(owner.organizationId)).toHaveLength(1);
    });

    it('answers the same SetupIntent to a retry carrying the same Idempotency-Key', async () => {
      const owner = await admin();
      const send = () =>
        t
          .http()
          .post('/v1/billing/payment-methods')
          .set('Authorization', owner.auth)
          .set('Idempotency-Key', 'client-retry-1');
      const first = await send();
      const second = await send();
      expect([first.status, second.status]).toEqual([201, 201]);
      expect(second.body).toEqual(first.body);
    });

    it('creates exactly one Stripe customer when first needs arrive concurrently', async () => {
      const owner = await admin();
      const responses = await Promise.all(
        Array.from({ length: 6 }, () =>
          t.http().post('/v1/billing/payment-methods').set('Authorization', owner.auth),
        ),
      );
      expect(responses.map((r) => r.status)).toEqual(Array(6).fill(201));
      expect(fake.customersOf(owner.organizationId)).toHaveLength(1);
      const keys = new Set(
        fake
          .requestsTo('POST', /^\/v1\/customers$/)
          .filter(
            (r) =>
              (r.form.metadata as Record<string, string>).organization_id === owner.organizationId,
          )
          .map((r) => r.idempotencyKey),
      );
      expect([...keys]).toEqual([`customer-create:${owner.organizationId}`]);
      const rows = await db.query(
        'SELECT count(*)::int AS n FROM billing_customers WHERE organization_id = $1',
        [owner.organizationId],
      );
      expect(rows[0].n).toBe(1);
    });
  });

  describe('invoices', () => {
    it("lists the organization's invoices in our shape, paged by Stripe's cursor; B never sees A's", async () => {
      const a = await admin();
      const b = await admin();
      for (const owner of [a, b]) {
        await t.http().post('/v1/billing/payment-methods').set('Authorization', owner.auth);
      }
      const aCustomer = await customerIdOf(a.organizationId);
      const bCustomer = await customerIdOf(b.organizationId);
      const mine = [
        fake.addInvoice(aCustomer),
        fake.addInvoice(aCustomer),
        fake.addInvoice(aCustomer),
      ];
      const theirs = fake.addInvoice(bCustomer, { status: 'open', amount_paid: 0 });

      const page1 = await t.http().get('/v1/billing/invoices?limit=2').set('Authorization', a.auth);
      expect(page1.status).toBe(200);
      expect(page1.body.has_more).toBe(true);
      const newest = mine[2];
      expect(page1.body.data[0]).toEqual({
        id: newest.id,
        number: newest.number,
        status: 'paid',
        currency: 'eur',
        amount_due: 4900,
        amount_paid: 4900,
        created: new Date((newest.created as number) * 1000).toISOString(),
        hosted_invoice_url: newest.hosted_invoice_url,
        invoice_pdf: newest.invoice_pdf,
      });
      const page2 = await t
        .http()
        .get(`/v1/billing/invoices?limit=2&starting_after=${page1.body.data[1].id}`)
        .set('Authorization', a.auth);
      expect(page2.body).toEqual({
        data: [expect.objectContaining({ id: mine[0].id })],
        has_more: false,
      });
      const lastCall = fake.requestsTo('GET', /^\/v1\/invoices$/).at(-1)!;
      expect(lastCall.query.get('customer')).toBe(aCustomer);
      expect(lastCall.query.get('starting_after')).toBe(page1.body.data[1].id);

      const ids = [...page1.body.data, ...page2.body.data].map((i: { id: string }) => i.id);
      expect(ids).not.toContain(theirs.id);
      const forB = await t.http().get('/v1/billing/invoices').set('Authorization', b.auth);
      expect(forB.body.data.map((i: { id: string }) => i.id)).toEqual([theirs.id]);

      expectError(
        await t
          .http()
          .get('/v1/billing/invoices?starting_after=nonsense')
          .set('Authorization', a.auth),
        400,
        'validation_failed',
      );
      // Well formed but naming no invoice of theirs: another customer's, or one made up.
      for (const cursor of [theirs.id as string, 'in_0000000000']) {
        const refused = await t
          .http()
          .get(`/v1/billing/invoices?starting_after=${cursor}`)
          .set('Authorization', a.auth);
        expectError(refused, 400, 'validation_failed');
        expect(JSON.stringify(refused.body)).not.toContain(theirs.id);
      }
    });

    it('answers an empty list without creating a customer when the organization has none', async () => {
      const owner = await admin();
      const response = await t.http().get('/v1/billing/invoices').set('Authorization', owner.auth);
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ data: [], has_more: false });
      expect(fake.customersOf(owner.organizationId)).toHaveLength(0);
    });
  });

  describe('subscription', () => {
    it('starts one subscription, reads it back, and refuses a second with 409', async () => {
      const owner = await admin();
      expectError(
        await t.http().get('/v1/billing/subscription').set('Authorization', owner.auth),
        404,
        'not_found',
      );
      const { subscription, stripe } = await subscribed(owner);
      expect(subscription).toEqual({
        id: expect.stringMatching(/^sub_/),
        status: 'active',
        price_id: 'price_basic',
        current_period_end: new Date(stripe.items.data[0].current_period_end * 1000).toISOString(),
        cancel_at_period_end: false,
        latest_invoice: null,
        created_at: expect.any(String),
        updated_at: expect.any(String),
      });
      const read = await t.http().get('/v1/billing/subscription').set('Authorization', owner.auth);
      expect(read.status).toBe(200);
      expect(read.body).toEqual(subscription);

      const second = await t
        .http()
        .post('/v1/billing/subscription')
        .set('Authorization', owner.auth)
        .send({ price_id: 'price_pro' });
      expectError(second, 409, 'subscription_exists');
      const customerId = await customerIdOf(owner.organizationId);
      expect(fake.subscriptionsOf(customerId)).toHaveLength(1);
      const [create] = fake
        .requestsTo('POST', /^\/v1\/subscriptions$/)
        .filter((r) => r.form.customer === customerId);
      expect(create.idempotencyKey).toBe(`subscription-create:${owner.organizationId}:0`);
    });

    it('validates price_id and answers 400 for a price Stripe does not know', async () => {
      const owner = await admin();
      for (const body of [{}, { price_id: 'basic' }, { price_id: 'price_x', extra: 1 }]) {
        expectError(
          await t
            .http()
            .post('/v1/billing/subscription')
            .set('Authorization', owner.auth)
            .send(body),
          400,
          'validation_failed',
        );
      }
      expectError(
        await t
          .http()
          .post('/v1/billing/subscription')
          .set('Authorization', owner.auth)
          .send({ price_id: 'price_missing1' }),
        400,
        'validation_failed',
      );
      // Active in the Stripe account, but not one the operator offers: refused without asking.
      const asked = fake.requestsTo('GET', /^\/v1\/prices\//).length;
      expectError(
        await t
          .http()
          .post('/v1/billing/subscription')
          .set('Authorization', owner.auth)
          .send({ price_id: 'price_internalfree' }),
        400,
        'validation_failed',
      );
      expect(fake.requestsTo('GET', /^\/v1\/prices\//)).toHaveLength(asked);
      const rows = await db.query(
        'SELECT count(*)::int AS n FROM billing_subscriptions WHERE organization_id = $1',
        [owner.organizationId],
      );
      expect(rows[0].n).toBe(0);
    });

    it('leaves one Stripe subscription when concurrent starts race', async () => {
      const owner = await admin();
      await t.http().post('/v1/billing/payment-methods').set('Authorization', owner.auth);
      const responses = await Promise.all(
        ['price_basic', 'price_basic', 'price_pro', 'price_basic'].map((price_id) =>
          t
            .http()
            .post('/v1/billing/subscription')
            .set('Authorization', owner.auth)
            .send({ price_id }),
        ),
      );
      for (const response of responses) expect([201, 409]).toContain(response.status);
      expect(responses.some((r) => r.status === 201)).toBe(true);
      const customerId = await customerIdOf(owner.organizationId);
      expect(fake.subscriptionsOf(customerId)).toHaveLength(1);
      const created = responses.filter((r) => r.status === 201).map((r) => r.body.id);
      expect(new Set(created).size).toBe(1);
      // However many starts got it, the subscription started once in the audit log.
      const audit = await t
        .http()
        .get('/v1/audit-events?action=subscription.started')
        .set('Authorization', owner.auth);
      expect(audit.body.data.map((event: { target: { id: string } }) => event.target.id)).toEqual([
        created[0],
      ]);
    });

    it('cancels the subscription it just created when another became live meanwhile', async () => {
      const owner = await admin();
      await t.http().post('/v1/billing/payment-methods').set('Authorization', owner.auth);
      const customerId = await customerIdOf(owner.organizationId);
      fake.delay('POST', /^\/v1\/subscriptions$/, 400);
      const creates = fake.requestsTo('POST', /^\/v1\/subscriptions$/).length;
      const starting = t
        .http()
        .post('/v1/billing/subscription')
        .set('Authorization', owner.auth)
        .send({ price_id: 'price_basic' })
        .then((response) => response);
      // Meanwhile (Stripe holds the create for 400 ms) a subscription made in the dashboard
      // arrives by webhook.
      await eventually(
        () => fake.requestsTo('POST', /^\/v1\/subscriptions$/)[creates],
        'the create to reach Stripe',
      );
      const dashboard = {
        id: `sub_dashboard${randomBytes(4).toString('hex')}`,
        object: 'subscription',
        customer: customerId,
        status: 'active',
        pause_collection: null,
        cancel_at_period_end: false,
        items: { object: 'list', data: [] },
      };
      expect(
        (await deliver(stripeEvent('customer.subscription.created', dashboard, nowSeconds())))
          .status,
      ).toBe(200);
      const response = await starting;
      expectError(response, 409, 'subscription_exists');
      const [created] = fake.subscriptionsOf(customerId);
      expect(created.status).toBe('canceled');
      const [cancel] = fake.requestsTo('DELETE', new RegExp(`^/v1/subscriptions/${created.id}$`));
      expect(cancel.idempotencyKey).toBe(`subscription-cancel-orphan:${created.id}`);
      const read = await t.http().get('/v1/billing/subscription').set('Authorization', owner.auth);
      expect(read.body.id).toBe(dashboard.id);
    });

    it('suspends by pausing collection (void), idempotently, and resumes by clearing it', async () => {
      const { owner, subscription, stripe } = await subscribed();
      const path = new RegExp(`^/v1/subscriptions/${subscription.id}$`);

      const suspended = await t
        .http()
        .post('/v1/billing/subscription/suspend')
        .set('Authorization', owner.auth);
      expect(suspended.status).toBe(200);
      expect(suspended.body).toMatchObject({ id: subscription.id, status: 'suspended' });
      const calls = fake.requestsTo('POST', path);
      expect(calls).toHaveLength(1);
      expect(calls[0].form).toEqual({ pause_collection: { behavior: 'void' } });
      expect(calls[0].idempotencyKey).toMatch(
        new RegExp(`^subscription-suspend:${subscription.id}:`),
      );
      expect(stripe.pause_collection).toEqual({ behavior: 'void', resumes_at: null });

      const again = await t
        .http()
        .post('/v1/billing/subscription/suspend')
        .set('Authorization', owner.auth);
      expect(again.status).toBe(200);
      expect(again.body.status).toBe('suspended');
      expect(fake.requestsTo('POST', path)).toHaveLength(1);

      const resumed = await t
        .http()
        .post('/v1/billing/subscription/resume')
        .set('Authorization', owner.auth);
      expect(resumed.status).toBe(200);
      expect(resumed.body.status).toBe('active');
      const resumeCall = fake.requestsTo('POST', path)[1];
      expect(resumeCall.form).toEqual({ pause_collection: '' });
      expect(resumeCall.idempotencyKey).toMatch(/^subscription-resume:/);
      expect(stripe.pause_collection).toBeNull();

      const resumedAgain = await t
        .http()
        .post('/v1/billing/subscription/resume')
        .set('Authorization', owner.auth);
      expect(resumedAgain.status).toBe(200);
      expect(fake.requestsTo('POST', path)).toHaveLength(2);

      // Suspending again is a new operation: a new key, really sent.
      const suspendedAgain = await t
        .http()
        .post('/v1/billing/subscription/suspend')
        .set('Authorization', owner.auth);
      expect(suspendedAgain.body.status).toBe('suspended');
      const third = fake.requestsTo('POST', path)[2];
      expect(third.idempotencyKey).not.toBe(calls[0].idempotencyKey);
      expect(stripe.pause_collection).not.toBeNull();

      // The audit log: one event per change, none for the repeats that changed nothing.
      const audit = await t.http().get('/v1/audit-events').set('Authorization', owner.auth);
      expect(
        audit.body.data
          .filter((event: { action: string }) => event.action.startsWith('subscription.'))
          .map((event: { action: string; target: unknown }) => [event.action, event.target]),
      ).toEqual(
        [
          'subscription.suspended',
          'subscription.resumed',
          'subscription.suspended',
          'subscription.started',
        ].map((action) => [action, { type: 'subscription', id: subscription.id }]),
      );
      expect(audit.body.data[0].request_id).toBe(suspendedAgain.headers['x-request-id']);
    });

    it('answers 404 to suspend and resume without a subscription', async () => {
      const owner = await admin();
      for (const action of ['suspend', 'resume']) {
        expectError(
          await t
            .http()
            .post(`/v1/billing/subscription/${action}`)
            .set('Authorization', owner.auth),
          404,
          'not_found',
        );
      }
    });
  });

  describe('provider failures', () => {
    it('retries a 500 with the same idempotency key and ends with one object', async () => {
      const owner = await admin();
      fake.fail('POST', /^\/v1\/customers$/, 500, 1);
      const response = await t
        .http()
        .post('/v1/billing/payment-methods')
        .set('Authorization', owner.auth);
      expect(response.status).toBe(201);
      const attempts = fake
        .requestsTo('POST', /^\/v1\/customers$/)
        .filter(
          (r) =>
            (r.form.metadata as Record<string, string>).organization_id === owner.organizationId,
        );
      expect(attempts).toHaveLength(2);
      expect(attempts[0].idempotencyKey).toBe(attempts[1].idempotencyKey);
      expect(fake.customersOf(owner.organizationId)).toHaveLength(1);

      const customerId = await customerIdOf(owner.organizationId);
      fake.fail('POST', /^\/v1\/subscriptions$/, 500, 1);
      const started = await t
        .http()
        .post('/v1/billing/subscription')
        .set('Authorization', owner.auth)
        .send({ price_id: 'price_basic' });
      expect(started.status).toBe(201);
      const creates = fake
        .requestsTo('POST', /^\/v1\/subscriptions$/)
        .filter((r) => r.form.customer === customerId);
      expect(creates).toHaveLength(2);
      expect(creates[0].idempotencyKey).toBe(creates[1].idempotencyKey);
      expect(fake.subscriptionsOf(customerId)).toHaveLength(1);
    });

    it('answers 502 within the timeout when Stripe hangs, and stores nothing', async () => {
      const owner = await admin();
      fake.hang('POST', /^\/v1\/customers$/);
      const started = Date.now();
      const response = await t
        .http()
        .post('/v1/billing/payment-methods')
        .set('Authorization', owner.auth);
      const elapsed = Date.now() - started;
      expectError(response, 502, 'payment_provider_error');
      expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(elapsed).toBeLessThan(TIMEOUT_MS + 1000);
      const rows = await db.query('SELECT 1 FROM billing_customers WHERE organization_id = $1', [
        owner.organizationId,
      ]);
      expect(rows).toHaveLength(0);
      const requestId = response.headers['x-request-id'];
      expect(t.logs.forRequest(requestId)).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            msg: 'payment provider call timed out',
            operation: 'customers.create',
          }),
        ]),
      );
    });

    it("answers 502 to a Stripe error, logging our request id and Stripe's", async () => {
      const owner = await admin();
      await t.http().post('/v1/billing/payment-methods').set('Authorization', owner.auth);
      fake.fail('GET', /^\/v1\/invoices$/, 402, 1);
      const response = await t.http().get('/v1/billing/invoices').set('Authorization', owner.auth);
      expectError(response, 502, 'payment_provider_error');
      const line = t.logs
        .forRequest(response.headers['x-request-id'])
        .find((entry) => entry.msg === 'payment provider call failed');
      expect(line).toMatchObject({
        operation: 'invoices.list',
        stripeRequestId: expect.stringMatching(/^req_/),
      });
      expect(t.logs.text()).not.toContain(SECRET_KEY);
    });
  });

  describe('webhooks', () => {
    it('accepts a good signature (either rotated secret) and keeps the subscription in step', async () => {
      const { owner, stripe } = await subscribed();
      const later = nowSeconds() + 60;
      const response = await deliver(
        stripeEvent('customer.subscription.updated', { ...stripe, status: 'past_due' }, later),
      );
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ received: true });
      const read = await t.http().get('/v1/billing/subscription').set('Authorization', owner.auth);
      expect(read.body.status).toBe('past_due');

      const withOld = await deliver(
        stripeEvent('customer.subscription.updated', { ...stripe, status: 'active' }, later + 1),
        { secret: OLD_WEBHOOK_SECRET },
      );
      expect(withOld.status).toBe(200);
      const reread = await t
        .http()
        .get('/v1/billing/subscription')
        .set('Authorization', owner.auth);
      expect(reread.body.status).toBe('active');
    });

    it('answers 503 to an invoice of a subscription not mirrored yet, and 200 to its redelivery once it is', async () => {
      const owner = await admin();
      await t.http().post('/v1/billing/payment-methods').set('Authorization', owner.auth);
      const customer = await customerIdOf(owner.organizationId);
      const dashboard = {
        id: `sub_dashboard${randomBytes(4).toString('hex')}`,
        object: 'subscription',
        customer,
        status: 'active',
        pause_collection: null,
        cancel_at_period_end: false,
        items: { object: 'list', data: [] },
      };
      const invoiceId = `in_${randomBytes(6).toString('hex')}`;
      const paid = stripeEvent(
        'invoice.paid',
        {
          id: invoiceId,
          object: 'invoice',
          customer,
          parent: {
            type: 'subscription_details',
            subscription_details: { subscription: dashboard.id },
          },
        },
        nowSeconds(),
      );
      expectError(await deliver(paid), 503, 'service_unavailable');
      expect(
        (await deliver(stripeEvent('customer.subscription.created', dashboard, nowSeconds() - 1)))
          .status,
      ).toBe(200);
      expect((await deliver(paid)).status).toBe(200);
      const read = await t.http().get('/v1/billing/subscription').set('Authorization', owner.auth);
      expect(read.body).toMatchObject({
        id: dashboard.id,
        latest_invoice: { id: invoiceId, status: 'paid' },
      });
    });

    it('refuses a bad, missing or stale signature with 400 invalid_signature', async () => {
      const event = stripeEvent('invoice.paid', { id: 'in_x', object: 'invoice' }, nowSeconds());
      expectError(await deliver(event, { secret: 'whsec_wrong' }), 400, 'invalid_signature');
      expectError(
        await deliver(event, { timestamp: nowSeconds() - 301 }),
        400,
        'invalid_signature',
      );
      expectError(
        await t
          .http()
          .post('/v1/billing/webhooks')
          .set('Content-Type', 'application/json')
          .send(JSON.stringify(event)),
        400,
        'invalid_signature',
      );
      // Signed bytes must be the bytes received: re-serialised JSON does not verify.
      const payload = JSON.stringify(event);
      const header = Stripe.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET });
      expectError(
        await t
          .http()
          .post('/v1/billing/webhooks')
          .set('Content-Type', 'application/json')
          .set('Stripe-Signature', header)
          .send(JSON.stringify(event, null, 2)),
        400,
        'invalid_signature',
      );
      const stored = await db.query('SELECT 1 FROM billing_events WHERE id = $1', [event.id]);
      expect(stored).toHaveLength(0);
    });

    it('answers a signed event whose object lacks what the service reads with 200, recorded as ignored; one without an id or a time with 400', async () => {
      const malformed = [
        stripeEvent('customer.subscription.updated', {}, nowSeconds()),
        stripeEvent(
          'customer.subscription.created',
          { id: 'sub_x', status: 'active' },
          nowSeconds(),
        ),
        stripeEvent(
          'customer.subscription.deleted',
          {
            id: 'sub_y',
            status: 'canceled',
            customer: 'cus_y',
            items: { data: [{ current_period_end: 'soon' }] },
          },
          nowSeconds(),
        ),
        stripeEvent('invoice.paid', { customer: 'cus_z' }, nowSeconds()),
        // A whole number of seconds no Date holds (after the year 275760).
        stripeEvent(
          'customer.subscription.updated',
          {
            id: 'sub_far',
            status: 'active',
            customer: 'cus_far',
            items: { data: [{ current_period_end: 9_000_000_000_000 }] },
          },
          nowSeconds(),
        ),
      ];
      for (const event of malformed) {
        const answer = await deliver(event);
        expect({ type: event.type, status: answer.status, body: answer.body }).toEqual({
          type: event.type,
          status: 200,
          body: { received: true },
        });
        const stored = await db.query('SELECT outcome FROM billing_events WHERE id = $1', [
          event.id,
        ]);
        expect(stored).toEqual([{ outcome: 'ignored' }]);
        // Sent again: a duplicate, still 200.
        expect((await deliver(event)).status).toBe(200);
      }
      const { id: _id, ...withoutId } = stripeEvent('invoice.paid', { id: 'in_1' }, nowSeconds());
      expectError(await deliver(withoutId), 400, 'validation_failed');
      expectError(
        await deliver({
          ...stripeEvent('invoice.paid', { id: 'in_2' }, nowSeconds()),
          created: 'now',
        }),
        400,
        'validation_failed',
      );
    });

    it('applies the same event once, even when redelivered concurrently', async () => {
      const { stripe } = await subscribed();
      const event = stripeEvent(
        'customer.subscription.updated',
        { ...stripe, cancel_at_period_end: true },
        nowSeconds() + 60,
      );
      expect((await deliver(event)).status).toBe(200);
      const revision = await revisionOf(stripe.id);
      const rereads = fake.requestsTo('GET', /^\/v1\/subscriptions\//).length;
      const results = await Promise.all([deliver(event), deliver(event)]);
      expect(results.map((r) => r.status)).toEqual([200, 200]);
      expect(await revisionOf(stripe.id)).toBe(revision);
      // Recognised as already processed: neither compared again nor re-read from Stripe.
      const outcomes = t.logs
        .entries()
        .filter((entry) => entry.eventId === event.id)
        .map((entry) => entry.outcome);
      expect(outcomes).toEqual(['applied', 'duplicate', 'duplicate']);
      expect(fake.requestsTo('GET', /^\/v1\/subscriptions\//)).toHaveLength(rereads);
      const rows = await db.query('SELECT outcome FROM billing_events WHERE id = $1', [event.id]);
      expect(rows).toEqual([{ outcome: 'applied' }]);
    });

    it('ignores an older event arriving after a newer one', async () => {
      const { owner, stripe } = await subscribed();
      const base = nowSeconds() + 60;
      const newer = stripeEvent(
        'customer.subscription.updated',
        { ...stripe, status: 'past_due' },
        base + 20,
      );
      const older = stripeEvent(
        'customer.subscription.updated',
        { ...stripe, pause_collection: { behavior: 'void', resumes_at: null } },
        base + 10,
      );
      expect((await deliver(newer)).status).toBe(200);
      expect((await deliver(older)).status).toBe(200);
      const read = await t.http().get('/v1/billing/subscription').set('Authorization', owner.auth);
      expect(read.body.status).toBe('past_due');
      const rows = await db.query('SELECT outcome FROM billing_events WHERE id = $1', [older.id]);
      expect(rows).toEqual([{ outcome: 'stale' }]);
    });

    it('re-reads the subscription from Stripe when an event ties with the state held', async () => {
      const { owner, stripe } = await subscribed();
      const held = await db.query(
        'SELECT extract(epoch FROM provider_updated_at)::int AS at FROM billing_subscriptions WHERE stripe_subscription_id = $1',
        [stripe.id],
      );
      (fake.subscriptions.get(stripe.id) as FakeSubscription).status = 'canceled';
      const tie = stripeEvent(
        'customer.subscription.updated',
        { ...stripe, status: 'active' },
        held[0].at,
      );
      // The re-read fails first: the handler answers 5xx, nothing is stored, Stripe retries.
      fake.fail('GET', new RegExp(`^/v1/subscriptions/${stripe.id}$`), 400, 1);
      const failed = await deliver(tie);
      expect(failed.status).toBeGreaterThanOrEqual(500);
      expect(await db.query('SELECT 1 FROM billing_events WHERE id = $1', [tie.id])).toHaveLength(
        0,
      );

      const retried = await deliver(tie);
      expect(retried.status).toBe(200);
      const read = await t.http().get('/v1/billing/subscription').set('Authorization', owner.auth);
      expect(read.body.status).toBe('canceled');
    });

    it('records invoice outcomes, saved payment methods, and cancellation', async () => {
      const { owner, stripe } = await subscribed();
      const base = nowSeconds() + 60;
      const invoice = {
        id: `in_${randomBytes(6).toString('hex')}`,
        object: 'invoice',
        customer: stripe.customer,
        parent: { type: 'subscription_details', subscription_details: { subscription: stripe.id } },
      };
      expect((await deliver(stripeEvent('invoice.payment_failed', invoice, base))).status).toBe(
        200,
      );
      let read = await t.http().get('/v1/billing/subscription').set('Authorization', owner.auth);
      expect(read.body.latest_invoice).toEqual({
        id: invoice.id,
        status: 'payment_failed',
        at: new Date(base * 1000).toISOString(),
      });
      expect((await deliver(stripeEvent('invoice.paid', invoice, base + 5))).status).toBe(200);
      expect((await deliver(stripeEvent('invoice.payment_failed', invoice, base + 2))).status).toBe(
        200,
      );
      read = await t.http().get('/v1/billing/subscription').set('Authorization', owner.auth);
      expect(read.body.latest_invoice.status).toBe('paid');

      const intent = {
        id: 'seti_saved',
        object: 'setup_intent',
        customer: stripe.customer,
        payment_method: 'pm_card_visa',
        status: 'succeeded',
      };
      expect((await deliver(stripeEvent('setup_intent.succeeded', intent, base))).status).toBe(200);
      const customer = await db.query(
        'SELECT default_payment_method_id FROM billing_customers WHERE organization_id = $1',
        [owner.organizationId],
      );
      expect(customer[0].default_payment_method_id).toBe('pm_card_visa');

      const deleted = stripeEvent(
        'customer.subscription.deleted',
        { ...stripe, status: 'canceled' },
        base + 10,
      );
      expect((await deliver(deleted)).status).toBe(200);
      read = await t.http().get('/v1/billing/subscription').set('Authorization', owner.auth);
      expect(read.body.status).toBe('canceled');

      // A new subscription after cancellation is a new operation, charging the saved method.
      const restarted = await t
        .http()
        .post('/v1/billing/subscription')
        .set('Authorization', owner.auth)
        .send({ price_id: 'price_basic' });
      expect(restarted.status).toBe(201);
      expect(restarted.body.id).not.toBe(stripe.id);
      expect(fake.subscriptions.get(restarted.body.id)!.default_payment_method).toBe(
        'pm_card_visa',
      );
      expect(fake.requestsTo('POST', /^\/v1\/subscriptions$/).at(-1)!.idempotencyKey).toBe(
        `subscription-create:${owner.organizationId}:1`,
      );
    });

    it('acknowledges events it does not handle, and ones for unknown customers', async () => {
      const unknown = stripeEvent(
        'customer.subscription.created',
        {
          id: 'sub_unknown',
          object: 'subscription',
          customer: 'cus_unknown',
          status: 'active',
          pause_collection: null,
          cancel_at_period_end: false,
          items: { data: [] },
        },
        nowSeconds(),
      );
      expect((await deliver(unknown)).status).toBe(200);
      expect(
        (await deliver(stripeEvent('charge.succeeded', { id: 'ch_1' }, nowSeconds()))).status,
      ).toBe(200);
      const rows = await db.query('SELECT outcome FROM billing_events WHERE id = $1', [unknown.id]);
      expect(rows).toEqual([{ outcome: 'ignored' }]);
    });
  });
});

describe('Billing without STRIPE_SECRET_KEY', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({
      env: {
        STRIPE_SECRET_KEY: undefined,
        STRIPE_API_BASE: undefined,
        STRIPE_WEBHOOK_SECRET: undefined,
      },
    });
  });
  afterAll(() => t.close());

  it('answers 503 billing_not_configured on every billing endpoint; the rest works', async () => {
    const owner = await tenantWithKey(t, ['admin']);
    const calls = [
      t.http().get('/v1/billing/invoices'),
      t.http().post('/v1/billing/payment-methods'),
      t.http().get('/v1/billing/subscription'),
      t.http().post('/v1/billing/subscription').send({ price_id: 'price_basic' }),
      t.http().post('/v1/billing/subscription/suspend'),
      t.http().post('/v1/billing/subscription/resume'),
    ];
    for (const call of calls) {
      expectError(await call.set('Authorization', owner.auth), 503, 'billing_not_configured');
    }
    expectError(
      await t
        .http()
        .post('/v1/billing/webhooks')
        .set('Content-Type', 'application/json')
        .set('Stripe-Signature', 't=1,v1=abc')
        .send('{"id":"evt_1"}'),
      503,
      'billing_not_configured',
    );
    const keys = await t.http().get('/v1/api-keys').set('Authorization', owner.auth);
    expect(keys.status).toBe(200);
  });
});
