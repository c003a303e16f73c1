import { createHash } from 'node:crypto';
import { DataSource } from 'typeorm';
import { MeterEventsWorker, TOKEN_HOUR_GRACE_MS } from '../src/billing/meter-events.worker';
import { Clock, ManualClock } from '../src/common/time/clock';
import { expectError } from './support/assertions';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { FakeOpenAI, fakeModelEnv } from './support/fake-openai';
import { FakeStripe } from './support/fake-stripe';
import { createApiKey, tenantWithKey } from './support/identity';
import { createTestApp, TestApp } from './support/test-app';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Metered billing (contract §23): the meter events outbox, its worker and the fake Stripe. */
describe('Stripe meter events for active relationships and tokens (contract §23)', () => {
  let stripe: FakeStripe;
  let openai: FakeOpenAI;
  let t: TestApp;
  let db: DataSource;
  let worker: MeterEventsWorker;
  // An hour's start, so a spec can move past its end.
  const clock = new ManualClock(Math.floor(Date.now() / 3_600_000) * 3_600_000 + 60_000);

  beforeAll(async () => {
    stripe = await FakeStripe.start();
    openai = await FakeOpenAI.start();
    t = await createTestApp({
      env: {
        STRIPE_SECRET_KEY: 'sk_test_meter',
        STRIPE_API_BASE: stripe.baseUrl,
        STRIPE_MAX_NETWORK_RETRIES: '0',
        STRIPE_TIMEOUT_MS: '2000',
        STRIPE_METER_EVENT_NAME: 'active_relationships',
        STRIPE_TOKEN_METER_EVENT_NAME: 'provider_tokens',
        // The spec runs the worker itself.
        STRIPE_METER_POLL_INTERVAL_MS: '600000',
        STRIPE_METER_RETRY_BASE_MS: '1000',
        ...fakeModelEnv(openai),
      },
      override: (builder) => builder.overrideProvider(Clock).useValue(clock),
    });
    db = t.app.get(DataSource);
    worker = t.app.get(MeterEventsWorker);
    openai.respondAlwaysWith({ usage: { prompt_tokens: 100, completion_tokens: 50 } });
  });
  afterAll(async () => {
    await t.close();
    await stripe.close();
    await openai.close();
  });

  async function tenant(options: { customer: boolean }) {
    const owner = await tenantWithKey(t, ['read_write']);
    const admin = `Bearer ${await createApiKey(t, owner.accessToken, ['admin'], 'admin key')}`;
    if (options.customer) {
      const created = await t
        .http()
        .post('/v1/billing/payment-methods')
        .set('Authorization', admin);
      expect(created.status).toBe(201);
    }
    const customer = stripe.customersOf(owner.organizationId)[0]?.id as string | undefined;
    return { ...owner, admin, customer, personalityId: await clonePersonality(t, owner.auth) };
  }
  type Tenant = Awaited<ReturnType<typeof tenant>>;

  const reply = (who: Tenant, userId: string, personalityId = who.personalityId) =>
    t
      .http()
      .post('/v1/respond')
      .set('Authorization', who.auth)
      .send({ personality_id: personalityId, user_id: userId, message: 'hi' });

  const usage = (who: Tenant) => t.http().get('/v1/billing/usage').set('Authorization', who.admin);

  async function expectedIdentifier(who: Tenant, userId: string, personalityId: string) {
    const [row] = await db.query<Array<{ id: string }>>(
      'SELECT id FROM end_users WHERE organization_id = $1 AND user_id = $2',
      [who.organizationId, userId],
    );
    const month = clock.now().toISOString().slice(0, 7);
    return sha256(`${who.organizationId}:${month}:${row.id}:${personalityId}`);
  }

  const eventsOf = (customer: string | undefined, name = 'active_relationships') =>
    stripe.meterEvents.filter(
      (event) => event.payload.stripe_customer_id === customer && event.event_name === name,
    );

  it('sends one event per relationship new in the month, with the identifier of §23, once', async () => {
    const who = await tenant({ customer: true });
    const second = await clonePersonality(t, who.auth, 'sunny-coach');
    const [u1, u2] = [uniqueUserId(), uniqueUserId()];
    for (const [userId, personalityId] of [
      [u1, who.personalityId],
      [u1, who.personalityId],
      [u1, second],
      [u2, who.personalityId],
    ]) {
      expect((await reply(who, userId, personalityId)).status).toBe(200);
    }
    const month = clock.now().toISOString().slice(0, 7);
    const before = await usage(who);
    expect(before.status).toBe(200);
    expect(before.body).toEqual({
      month,
      active_relationships: 3,
      tokens: 4 * 150,
      meter_events_pending: 3,
    });
    await worker.runOnce();
    const sent = eventsOf(who.customer);
    expect(sent.map((event) => event.identifier).sort()).toEqual(
      [
        await expectedIdentifier(who, u1, who.personalityId),
        await expectedIdentifier(who, u1, second),
        await expectedIdentifier(who, u2, who.personalityId),
      ].sort(),
    );
    for (const event of sent) {
      expect(event.payload).toEqual({ stripe_customer_id: who.customer, value: '1' });
    }
    expect((await usage(who)).body.meter_events_pending).toBe(0);
    // Delivered events are never sent again; a relationship seen again queues nothing.
    expect((await reply(who, u2)).status).toBe(200);
    await worker.runOnce();
    expect(eventsOf(who.customer)).toHaveLength(3);
    expect(stripe.duplicateMeterEvents).toBe(0);
  });

  it('keeps the events through a Stripe outage and sends each once when it is back', async () => {
    const who = await tenant({ customer: true });
    stripe.fail('POST', /^\/v1\/billing\/meter_events$/, 500, 1_000_000);
    const users = Array.from({ length: 12 }, () => uniqueUserId('outage'));
    for (const userId of users) expect((await reply(who, userId)).status).toBe(200);
    await worker.runOnce();
    clock.advance(60_000);
    await worker.runOnce();
    expect(eventsOf(who.customer)).toHaveLength(0);
    expect((await usage(who)).body.meter_events_pending).toBe(12);
    const [{ attempts }] = await db.query<Array<{ attempts: number }>>(
      'SELECT min(attempts)::int AS attempts FROM meter_events WHERE organization_id = $1',
      [who.organizationId],
    );
    expect(attempts).toBe(2);
    stripe.clearFaults();
    // Not before its backoff is over…
    await worker.runOnce();
    expect(eventsOf(who.customer)).toHaveLength(0);
    clock.advance(3_600_000);
    await worker.runOnce();
    const sent = eventsOf(who.customer);
    expect(sent).toHaveLength(12);
    expect(new Set(sent.map((event) => event.identifier)).size).toBe(12);
    await worker.runOnce();
    expect(eventsOf(who.customer)).toHaveLength(12);
    expect(stripe.duplicateMeterEvents).toBe(0);
    expect((await usage(who)).body.meter_events_pending).toBe(0);
  });

  it('meters nothing for an organization without a Stripe customer (it is not billed by meter)', async () => {
    const who = await tenant({ customer: false });
    expect(who.customer).toBeUndefined();
    expect((await reply(who, uniqueUserId())).status).toBe(200);
    const [{ count }] = await db.query<Array<{ count: number }>>(
      'SELECT count(*)::int AS count FROM meter_events WHERE organization_id = $1',
      [who.organizationId],
    );
    expect(count).toBe(0);
    expect((await usage(who)).body).toMatchObject({
      active_relationships: 1,
      meter_events_pending: 0,
    });
    // From its customer on, its new relationships are metered.
    expect(
      (await t.http().post('/v1/billing/payment-methods').set('Authorization', who.admin)).status,
    ).toBe(201);
    const customer = stripe.customersOf(who.organizationId)[0].id as string;
    expect((await reply(who, uniqueUserId())).status).toBe(200);
    await worker.runOnce();
    expect(eventsOf(customer)).toHaveLength(1);
  });

  it("sends an hour's tokens as one event once the hour is over", async () => {
    const who = await tenant({ customer: true });
    // A fresh hour.
    clock.set(new Date(Math.ceil(clock.nowMs() / 3_600_000) * 3_600_000 + 1_000));
    const hour = new Date(Math.floor(clock.nowMs() / 3_600_000) * 3_600_000);
    for (let i = 0; i < 3; i++) expect((await reply(who, uniqueUserId())).status).toBe(200);
    await worker.runOnce();
    expect(eventsOf(who.customer, 'provider_tokens')).toHaveLength(0);
    clock.set(new Date(hour.getTime() + 3_600_000 + TOKEN_HOUR_GRACE_MS + 1_000));
    await worker.runOnce();
    const tokens = eventsOf(who.customer, 'provider_tokens');
    expect(tokens).toEqual([
      {
        event_name: 'provider_tokens',
        identifier: sha256(`${who.organizationId}:tokens:${hour.toISOString().slice(0, 13)}`),
        payload: { stripe_customer_id: who.customer, value: String(3 * 150) },
        timestamp: hour.getTime() / 1000,
      },
    ]);
  });

  it("sends tokens added to an hour already sent as an event of their own (an instance's clock behind)", async () => {
    const who = await tenant({ customer: true });
    clock.set(new Date(Math.ceil(clock.nowMs() / 3_600_000) * 3_600_000 + 1_000));
    const hour = new Date(Math.floor(clock.nowMs() / 3_600_000) * 3_600_000);
    const hourKey = `${who.organizationId}:tokens:${hour.toISOString().slice(0, 13)}`;
    const sealedAt = new Date(hour.getTime() + 3_600_000 + TOKEN_HOUR_GRACE_MS + 1_000);
    expect((await reply(who, uniqueUserId())).status).toBe(200);
    clock.set(sealedAt);
    await worker.runOnce();
    // Replies stored in the hour after its event was queued: their instance's clock is behind.
    const late = async (replies: number) => {
      clock.set(new Date(hour.getTime() + 3_599_000));
      for (let i = 0; i < replies; i++) expect((await reply(who, uniqueUserId())).status).toBe(200);
      clock.set(sealedAt);
      await worker.runOnce();
    };
    await late(2);
    await late(1);
    await worker.runOnce();
    expect(
      eventsOf(who.customer, 'provider_tokens').map(({ identifier, payload, timestamp }) => ({
        identifier,
        value: payload.value,
        timestamp,
      })),
    ).toEqual([
      { identifier: sha256(hourKey), value: '150', timestamp: hour.getTime() / 1000 },
      { identifier: sha256(`${hourKey}:late:1`), value: '300', timestamp: hour.getTime() / 1000 },
      { identifier: sha256(`${hourKey}:late:2`), value: '150', timestamp: hour.getTime() / 1000 },
    ]);
    const [row] = await db.query<Array<{ tokens: string; late_tokens: string }>>(
      'SELECT tokens, late_tokens FROM meter_token_hours WHERE organization_id = $1 AND hour = $2',
      [who.organizationId, hour],
    );
    expect(row).toEqual({ tokens: '600', late_tokens: '0' });
  });

  it('GET /v1/billing/usage needs the admin scope and a valid month', async () => {
    const who = await tenant({ customer: false });
    expectError(
      await t.http().get('/v1/billing/usage').set('Authorization', who.auth),
      403,
      'insufficient_scope',
    );
    expectError(
      await t.http().get('/v1/billing/usage?month=2026-13').set('Authorization', who.admin),
      400,
      'validation_failed',
    );
    const old = await t
      .http()
      .get('/v1/billing/usage?month=2020-01')
      .set('Authorization', who.admin);
    expect(old.body).toEqual({
      month: '2020-01',
      active_relationships: 0,
      tokens: 0,
      meter_events_pending: 0,
    });
  });
});
