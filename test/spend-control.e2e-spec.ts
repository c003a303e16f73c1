import { DataSource } from 'typeorm';
import { Clock, ManualClock } from '../src/common/time/clock';
import { ErasureWorker } from '../src/end-users/erasure.worker';
import { expectError } from './support/assertions';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { FakeOpenAI, fakeModelEnv } from './support/fake-openai';
import { createApiKey, tenantWithKey } from './support/identity';
import { INVALID_LIMITS_BODIES } from './support/limits-bodies';
import { answeredDuringDemotion } from './support/locks';
import { lookupOrderTool } from './support/tools';
import { createTestApp, TestApp } from './support/test-app';

type Tenant = Awaited<ReturnType<typeof tenantWithKey>>;

/** Every reply of the fake provider costs this much: 100 prompt + 50 completion tokens. */
const REPLY_TOKENS = 150;
const MAX_TOKENS = 64;

/**
 * Spend control (contract §23) on one instance without Redis: limits, 402 with its details
 * object, reservations under concurrency, a month boundary during a reply, the per-key and
 * per-end-user buckets, the breakdown and the thresholds' webhook events.
 */
describe('Spend control: budgets, buckets, breakdown (contract §23)', () => {
  let fake: FakeOpenAI;
  let t: TestApp;
  let db: DataSource;
  const clock = new ManualClock();

  beforeAll(async () => {
    fake = await FakeOpenAI.start();
    t = await createTestApp({
      env: {
        ...fakeModelEnv(fake),
        ENGINE_TIMEOUT_MS: '5000',
        ENGINE_MAX_TOKENS: String(MAX_TOKENS),
        ERASURE_GRACE_SECONDS: '0',
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      },
      override: (builder) => builder.overrideProvider(Clock).useValue(clock),
    });
    db = t.app.get(DataSource);
  });
  beforeEach(() => {
    fake.reset();
    fake.respondAlwaysWith({ usage: { prompt_tokens: 100, completion_tokens: 50 } });
  });
  afterAll(async () => {
    await t.close();
    await fake.close();
  });

  async function tenant(): Promise<Tenant & { personalityId: string; admin: string }> {
    const owner = await tenantWithKey(t, ['read_write']);
    const admin = `Bearer ${await createApiKey(t, owner.accessToken, ['admin'], 'admin key')}`;
    return { ...owner, admin, personalityId: await clonePersonality(t, owner.auth) };
  }

  const reply = (who: { auth: string; personalityId: string }, userId: string, message = 'hi') =>
    t
      .http()
      .post('/v1/respond')
      .set('Authorization', who.auth)
      .send({ personality_id: who.personalityId, user_id: userId, message });

  const setLimits = (who: Tenant & { admin: string }, body: Record<string, unknown>) =>
    t
      .http()
      .patch(`/v1/organizations/${who.organizationId}/limits`)
      .set('Authorization', who.admin)
      .send(body);

  async function monthTokens(organizationId: string, month: string): Promise<number> {
    const rows = await db.query<Array<{ used: string }>>(
      `SELECT prompt_tokens + completion_tokens AS used FROM token_usage_months
        WHERE organization_id = $1 AND month = $2`,
      [organizationId, `${month}-01`],
    );
    return Number(rows[0]?.used ?? 0);
  }

  describe('GET/PATCH /v1/organizations/{id}/limits', () => {
    it('has no limit by default; an admin sets and clears them; others read only', async () => {
      const a = await tenant();
      const path = `/v1/organizations/${a.organizationId}/limits`;
      const none = await t.http().get(path).set('Authorization', a.auth);
      expect(none.status).toBe(200);
      expect(none.body).toEqual({
        monthly_token_budget: null,
        end_user_daily_token_budget: null,
        end_user_rate_limit: null,
      });
      const set = await setLimits(a, {
        monthly_token_budget: 1_000_000,
        end_user_rate_limit: { rps: 0.5, burst: 3 },
      });
      expect(set.status).toBe(200);
      expect(set.body).toEqual({
        monthly_token_budget: 1_000_000,
        end_user_daily_token_budget: null,
        end_user_rate_limit: { rps: 0.5, burst: 3 },
      });
      // A PATCH changes only what it names; null clears.
      const merged = await setLimits(a, {
        end_user_daily_token_budget: 2 ** 53 - 1,
        end_user_rate_limit: null,
      });
      expect(merged.body).toEqual({
        monthly_token_budget: 1_000_000,
        end_user_daily_token_budget: 2 ** 53 - 1,
        end_user_rate_limit: null,
      });
      const asMember = await t.http().get(path).set('Authorization', `Bearer ${a.accessToken}`);
      expect(asMember.body).toEqual(merged.body);
      // A read_write key reads but may not change them; another organization is not found.
      expectError(
        await t.http().patch(path).set('Authorization', a.auth).send({ monthly_token_budget: 5 }),
        403,
        'insufficient_scope',
      );
      const b = await tenant();
      expectError(await t.http().get(path).set('Authorization', b.admin), 404, 'not_found');
      expectError(await t.http().get(path), 401, 'unauthenticated');
    });

    it('an admin demoted while their PATCH runs changes nothing: 403, the limits as they were', async () => {
      const a = await tenant();
      const path = `/v1/organizations/${a.organizationId}/limits`;
      const answered = await answeredDuringDemotion(a, () =>
        t
          .http()
          .patch(path)
          .set('Authorization', `Bearer ${a.accessToken}`)
          .send({ monthly_token_budget: 5 }),
      );
      // Before, the PATCH was let through on the role read before the demotion, and wrote.
      expectError(answered, 403, 'insufficient_scope');
      const limits = await t.http().get(path).set('Authorization', a.admin);
      expect(limits.body).toMatchObject({ monthly_token_budget: null });
    });

    it('concurrent PATCHes of different limits all land; each answers the limits it left', async () => {
      const a = await tenant();
      const path = `/v1/organizations/${a.organizationId}/limits`;
      for (const [round, [monthly, daily, rps]] of [
        [1_000, 100, 1],
        [2_000, 200, 2],
        [3_000, 300, 3],
      ].entries()) {
        const bucket = { rps, burst: rps * 10 };
        const answers = await Promise.all([
          setLimits(a, { monthly_token_budget: monthly }),
          setLimits(a, { end_user_daily_token_budget: daily }),
          setLimits(a, { end_user_rate_limit: bucket }),
        ]);
        expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
        expect(answers[0].body.monthly_token_budget).toBe(monthly);
        expect(answers[1].body.end_user_daily_token_budget).toBe(daily);
        expect(answers[2].body.end_user_rate_limit).toEqual(bucket);
        const stored = await t.http().get(path).set('Authorization', a.admin);
        expect({ round, limits: stored.body }).toEqual({
          round,
          limits: {
            monthly_token_budget: monthly,
            end_user_daily_token_budget: daily,
            end_user_rate_limit: bucket,
          },
        });
      }
    });

    it('refuses negative, zero, fractional, absurd and mistyped values with 400, changing nothing', async () => {
      const a = await tenant();
      await setLimits(a, { monthly_token_budget: 777 });
      const bad = INVALID_LIMITS_BODIES;
      for (const body of bad) {
        const response = await setLimits(a, body);
        expectError(response, 400, 'validation_failed');
        expect(Array.isArray(response.body.error.details)).toBe(true);
      }
      const after = await t
        .http()
        .get(`/v1/organizations/${a.organizationId}/limits`)
        .set('Authorization', a.auth);
      expect(after.body.monthly_token_budget).toBe(777);
    });
  });

  describe('token budgets (402 budget_exceeded)', () => {
    it('refuses a reply once the month is spent, with the details object and no provider call', async () => {
      const a = await tenant();
      await setLimits(a, { monthly_token_budget: 2 * REPLY_TOKENS });
      const userId = uniqueUserId();
      expect((await reply(a, userId)).status).toBe(200);
      expect((await reply(a, userId)).status).toBe(200);
      const calls = fake.requests.length;
      const refused = await reply(a, userId);
      expectError(refused, 402, 'budget_exceeded');
      const now = clock.now();
      expect(refused.body.error.details).toEqual({
        scope: 'organization',
        limit: 2 * REPLY_TOKENS,
        used: 2 * REPLY_TOKENS,
        resets_at: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString(),
      });
      expect(fake.requests.length).toBe(calls);
      // Streamed, the refusal is a plain 402 too, before any event.
      const streamed = await t
        .http()
        .post('/v1/respond')
        .set('Authorization', a.auth)
        .send({ personality_id: a.personalityId, user_id: userId, message: 'hi', stream: true });
      expectError(streamed, 402, 'budget_exceeded');
      expect(fake.requests.length).toBe(calls);
    });

    it('does not keep a 402 under its Idempotency-Key: the retry runs again once there is room', async () => {
      const a = await tenant();
      await setLimits(a, { monthly_token_budget: 1 });
      const userId = uniqueUserId();
      const keyed = () =>
        t
          .http()
          .post('/v1/respond')
          .set('Authorization', a.auth)
          .set('Idempotency-Key', `budget-${userId}`)
          .send({ personality_id: a.personalityId, user_id: userId, message: 'hi' });
      expect((await reply(a, userId)).status).toBe(200);
      const refused = await keyed();
      expectError(refused, 402, 'budget_exceeded');
      await setLimits(a, { monthly_token_budget: null });
      const retried = await keyed();
      expect(retried.status).toBe(200);
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      // The answer that ran is the one kept.
      const replayed = await keyed();
      expect(replayed.status).toBe(200);
      expect(replayed.headers['idempotent-replayed']).toBe('true');
      expect(replayed.body.reply).toEqual(retried.body.reply);
    });

    it("refuses an end user past their daily budget, not the organization's other end users", async () => {
      const a = await tenant();
      await setLimits(a, { end_user_daily_token_budget: REPLY_TOKENS });
      const heavy = uniqueUserId('heavy');
      expect((await reply(a, heavy)).status).toBe(200);
      const refused = await reply(a, heavy);
      expectError(refused, 402, 'budget_exceeded');
      const now = clock.now();
      expect(refused.body.error.details).toEqual({
        scope: 'end_user',
        limit: REPLY_TOKENS,
        used: REPLY_TOKENS,
        resets_at: new Date(
          Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1),
        ).toISOString(),
      });
      expect((await reply(a, uniqueUserId('light'))).status).toBe(200);
    });

    it('a budget lowered below what is spent refuses the next reply; nothing else breaks; thresholds are sent once', async () => {
      const a = await tenant();
      const endpoint = await t
        .http()
        .post('/v1/webhook-endpoints')
        .set('Authorization', a.admin)
        .send({ url: 'http://127.0.0.1/spend-hook', events: ['usage.threshold_reached'] });
      expect(endpoint.status).toBe(201);
      await setLimits(a, { monthly_token_budget: 10 * REPLY_TOKENS });
      const userId = uniqueUserId();
      for (let i = 0; i < 4; i++) expect((await reply(a, userId)).status).toBe(200);
      // 600 of 1500: none reached. 5 replies: 750, 50 % reached.
      expect((await reply(a, userId)).status).toBe(200);
      const lowered = await setLimits(a, { monthly_token_budget: 3 * REPLY_TOKENS });
      expect(lowered.status).toBe(200);
      expectError(await reply(a, userId), 402, 'budget_exceeded');
      // Reads and other writes go on.
      const month = clock.now().toISOString().slice(0, 7);
      const tokens = await t
        .http()
        .get(`/v1/usage/tokens?month=${month}`)
        .set('Authorization', a.auth);
      expect(tokens.body).toMatchObject({
        requests: 5,
        prompt_tokens: 500,
        completion_tokens: 250,
      });
      expect(
        (
          await t
            .http()
            .get(`/v1/usage/breakdown?group_by=end_user&month=${month}`)
            .set('Authorization', a.auth)
        ).status,
      ).toBe(200);
      expect(
        (await t.http().get(`/v1/end-users/${userId}`).set('Authorization', a.auth)).status,
      ).toBe(200);
      // Raised again, replies pass; each threshold was sent once (50 by a reply, 80 and 100 by
      // the lowering), however many replies and changes found it reached.
      await setLimits(a, { monthly_token_budget: 100 * REPLY_TOKENS });
      expect((await reply(a, userId)).status).toBe(200);
      await setLimits(a, { monthly_token_budget: 3 * REPLY_TOKENS });
      const events = await db.query<Array<{ data: Record<string, unknown> }>>(
        `SELECT data FROM webhook_events WHERE organization_id = $1 AND type = 'usage.threshold_reached'
          ORDER BY (data->>'threshold')::int`,
        [a.organizationId],
      );
      expect(events.map((event) => event.data)).toEqual([
        { month, threshold: 50, used: 750, limit: 1500 },
        { month, threshold: 80, used: 750, limit: 450 },
        { month, threshold: 100, used: 750, limit: 450 },
      ]);
    });

    it("a budget set through the organization's id in upper case refuses the next reply", async () => {
      const a = await tenant();
      const userId = uniqueUserId();
      // The reply reads the limits, and keeps them for LIMITS_CACHE_MS.
      expect((await reply(a, userId)).status).toBe(200);
      const upperCase = `/v1/organizations/${a.organizationId.toUpperCase()}/limits`;
      // By the owner (a user, whose access is read from the membership whatever the case).
      const lowered = await t
        .http()
        .patch(upperCase)
        .set('Authorization', `Bearer ${a.accessToken}`)
        .send({ monthly_token_budget: 1 });
      expect(lowered.status).toBe(200);
      // Before, the change cleared the upper-case key: the reply kept the limits it had read.
      expectError(await reply(a, userId), 402, 'budget_exceeded');
      // An API key of the organization reads them by the same path (before: 404).
      const read = await t.http().get(upperCase).set('Authorization', a.admin);
      expect(read.status).toBe(200);
      expect(read.body).toMatchObject({ monthly_token_budget: 1 });
    });

    it('a reply settling after the budget was raised checks the thresholds of the raised budget (review)', async () => {
      const a = await tenant();
      await setLimits(a, { monthly_token_budget: 10 * REPLY_TOKENS }).expect(200);
      const userId = uniqueUserId();
      for (let i = 0; i < 4; i++) expect((await reply(a, userId)).status).toBe(200);
      // Admitted at 600 of 1,500; settles at 750 after the budget became 15,000: 5 %, none.
      fake.respondWith({ delayMs: 800, usage: { prompt_tokens: 100, completion_tokens: 50 } });
      const inFlight = reply(a, userId).then((response) => response);
      await fake.waitForRequests(5);
      await setLimits(a, { monthly_token_budget: 100 * REPLY_TOKENS }).expect(200);
      expect((await inFlight).status).toBe(200);
      const reached = await db.query<Array<{ threshold: number }>>(
        `SELECT threshold FROM usage_thresholds_reached WHERE organization_id = $1`,
        [a.organizationId],
      );
      expect(reached).toEqual([]);
    });

    it('a PATCH of another limit records the thresholds the kept budget finds reached', async () => {
      const a = await tenant();
      await t
        .http()
        .post('/v1/webhook-endpoints')
        .set('Authorization', a.admin)
        .send({ url: 'http://127.0.0.1/spend-hook', events: ['usage.threshold_reached'] })
        .expect(201);
      await setLimits(a, { monthly_token_budget: 1_500 }).expect(200);
      // Tokens stored without a threshold recorded: a reply admitted under an older budget.
      const month = clock.now().toISOString().slice(0, 7);
      await db.query(
        `INSERT INTO token_usage_months (organization_id, month, requests, prompt_tokens,
                                         completion_tokens, cached_tokens)
         VALUES ($1, $2, 10, 900, 400, 0)`,
        [a.organizationId, `${month}-01`],
      );
      await setLimits(a, { end_user_daily_token_budget: 5_000 }).expect(200);
      const events = await db.query<Array<{ data: Record<string, unknown> }>>(
        `SELECT data FROM webhook_events WHERE organization_id = $1 AND type = 'usage.threshold_reached'
          ORDER BY (data->>'threshold')::int`,
        [a.organizationId],
      );
      expect(events.map((event) => event.data)).toEqual([
        { month, threshold: 50, used: 1_300, limit: 1_500 },
        { month, threshold: 80, used: 1_300, limit: 1_500 },
      ]);
    });

    it('50 concurrent replies for the last 5 replies’ worth overshoot the budget by less than one reply', async () => {
      const a = await tenant();
      const userId = uniqueUserId();
      expect((await reply(a, userId)).status).toBe(200);
      const month = clock.now().toISOString().slice(0, 7);
      const spent = await monthTokens(a.organizationId, month);
      const limit = spent + 5 * REPLY_TOKENS;
      await setLimits(a, { monthly_token_budget: limit });
      fake.respondAlwaysWith({ usage: { prompt_tokens: 100, completion_tokens: 50 }, delayMs: 50 });
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) => reply(a, uniqueUserId(`c${i}`))),
      );
      const statuses = answers.map((answer) => answer.status);
      expect(statuses.filter((status) => status !== 200 && status !== 402)).toEqual([]);
      expect(statuses.filter((status) => status === 200).length).toBeGreaterThanOrEqual(1);
      const used = await monthTokens(a.organizationId, month);
      // Each reservation covers its reply, so past the last admission only that reply's own
      // tokens can land beyond the limit (docs/spend-control.md).
      expect(used - limit).toBeLessThan(REPLY_TOKENS);
      // Once the replies in flight are settled, what is left of the budget is there again.
      const after = await setLimits(a, { monthly_token_budget: used + REPLY_TOKENS });
      expect(after.status).toBe(200);
      expect((await reply(a, userId)).status).toBe(200);
    });

    it('a reply crossing a month boundary is counted in the month it is stored in; its reservation in the month it was made in is released', async () => {
      const a = await tenant();
      await setLimits(a, { monthly_token_budget: 1_000_000 });
      const userId = uniqueUserId();
      clock.set(new Date('2031-01-31T23:59:59.000Z'));
      try {
        fake.respondAlwaysWith({
          usage: { prompt_tokens: 100, completion_tokens: 50 },
          delayMs: 300,
        });
        // then(): supertest sends on the first then, not when the request is built.
        const pending = reply(a, userId).then((response) => response);
        await fake.waitForRequests(1);
        clock.set(new Date('2031-02-01T00:00:00.200Z'));
        expect((await pending).status).toBe(200);
        expect(await monthTokens(a.organizationId, '2031-01')).toBe(0);
        expect(await monthTokens(a.organizationId, '2031-02')).toBe(REPLY_TOKENS);
        // January's budget holds no reservation any more: a budget of exactly one reply's
        // estimate admits a January reply again.
        clock.set(new Date('2031-01-31T23:59:59.500Z'));
        await setLimits(a, { monthly_token_budget: 1 });
        fake.respondAlwaysWith({ usage: { prompt_tokens: 100, completion_tokens: 50 } });
        expect((await reply(a, userId)).status).toBe(200);
        expectError(await reply(a, userId), 402, 'budget_exceeded');
        // February's budget sees February's tokens only.
        clock.set(new Date('2031-02-01T00:00:01.000Z'));
        await setLimits(a, { monthly_token_budget: REPLY_TOKENS + 1 });
        expect((await reply(a, userId)).status).toBe(200);
        const refused = await reply(a, userId);
        expectError(refused, 402, 'budget_exceeded');
        expect(refused.body.error.details).toMatchObject({
          used: 2 * REPLY_TOKENS,
          resets_at: '2031-03-01T00:00:00.000Z',
        });
      } finally {
        clock.set(new Date());
      }
    });
  });

  describe('buckets per end user and per API key (429)', () => {
    it("a paused turn's resumption draws from its end user's bucket, as their reply did", async () => {
      const a = await tenant();
      const withTool = await t
        .http()
        .post('/v1/personalities/from-catalog')
        .set('Authorization', a.auth)
        .send({ slug: 'sage-mentor', tools: [lookupOrderTool] });
      expect(withTool.status).toBe(201);
      await setLimits(a, { end_user_rate_limit: { rps: 0.01, burst: 1 } });
      const pause = async (userId: string) => {
        fake.respondWith({
          toolCalls: [{ id: 'call_1', name: 'lookup_order', arguments: '{"order_id":"7"}' }],
          usage: { prompt_tokens: 10, completion_tokens: 5 },
        });
        const paused = await reply({ auth: a.auth, personalityId: withTool.body.id }, userId);
        expect(paused.body).toMatchObject({ status: 'requires_action' });
        return () =>
          t
            .http()
            .post(`/v1/respond/turns/${String(paused.body.turn_id)}/tool-outputs`)
            .set('Authorization', a.auth)
            .send({ outputs: [{ tool_call_id: 'call_1', output: { status: 'shipped' } }] });
      };
      const resume = await pause(uniqueUserId());
      const calls = fake.requests.length;
      const refused = await resume();
      expectError(refused, 429, 'rate_limited');
      expect(refused.headers['ratelimit-policy']).toBe('"end_user";q=1;w=100');
      expect(fake.requests.length).toBe(calls);
      // Another end user's bucket is their own; a turn of no one's draws none (404).
      const other = await pause(uniqueUserId());
      const unknown = await t
        .http()
        .post('/v1/respond/turns/turn_01JDZ6Q8B9N3X5W7Y2K4M6P8R0/tool-outputs')
        .set('Authorization', a.auth)
        .send({ outputs: [{ tool_call_id: 'call_1', output: {} }] });
      expectError(unknown, 404, 'not_found');
      expect(unknown.headers['ratelimit-policy']).not.toMatch(/^"end_user"/);
      expectError(await other(), 429, 'rate_limited');
    });

    it("an end user's bucket refuses that end user with its own headers; others still pass", async () => {
      const a = await tenant();
      await setLimits(a, { end_user_rate_limit: { rps: 0.01, burst: 2 } });
      const userId = uniqueUserId();
      const first = await reply(a, userId);
      expect(first.status).toBe(200);
      expect(first.headers['ratelimit-policy']).toBe('"end_user";q=2;w=200');
      expect(first.headers['x-ratelimit-remaining']).toBe('1');
      expect((await reply(a, userId)).status).toBe(200);
      const refused = await reply(a, userId);
      expectError(refused, 429, 'rate_limited');
      expect(refused.headers['x-ratelimit-limit']).toBe('0.01');
      expect(refused.headers['x-ratelimit-remaining']).toBe('0');
      expect(refused.headers['ratelimit-policy']).toBe('"end_user";q=2;w=200');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect((await reply(a, uniqueUserId())).status).toBe(200);
      // A user_id of 200 emoji (400 UTF-16 units) is 200 characters, as validation counts: its
      // bucket is drawn as any other's.
      const emoji = '😀'.repeat(200);
      expect((await reply(a, emoji)).status).toBe(200);
      expect((await reply(a, emoji)).status).toBe(200);
      expectError(await reply(a, emoji), 429, 'rate_limited');
      // Other routes are not the end user's.
      const list = await t.http().get('/v1/end-users').set('Authorization', a.auth);
      expect(list.status).toBe(200);
      expect(list.headers['ratelimit-policy']).toMatch(/^"org";/);
    });

    it("an API key's rate_limit is a bucket of its own, set at creation and by PATCH", async () => {
      const a = await tenant();
      const created = await t
        .http()
        .post('/v1/api-keys')
        .set('Authorization', a.admin)
        .send({ name: 'partner', scopes: ['read'], rate_limit: { rps: 0.01, burst: 1 } });
      expect(created.status).toBe(201);
      expect(created.body.rate_limit).toEqual({ rps: 0.01, burst: 1 });
      const partner = `Bearer ${created.body.key}`;
      expect((await t.http().get('/v1/end-users').set('Authorization', partner)).status).toBe(200);
      const refused = await t.http().get('/v1/end-users').set('Authorization', partner);
      expectError(refused, 429, 'rate_limited');
      expect(refused.headers['x-ratelimit-limit']).toBe('0.01');
      expect(refused.headers['ratelimit-policy']).toBe('"key";q=1;w=100');
      // The organization's other keys are not held back.
      expect((await t.http().get('/v1/end-users').set('Authorization', a.auth)).status).toBe(200);
      const listed = await t.http().get('/v1/api-keys').set('Authorization', a.admin);
      expect(
        listed.body.data.find((key: { id: string }) => key.id === created.body.id),
      ).toMatchObject({
        rate_limit: { rps: 0.01, burst: 1 },
      });
      const lifted = await t
        .http()
        .patch(`/v1/api-keys/${created.body.id}`)
        .set('Authorization', a.admin)
        .send({ rate_limit: null });
      expect(lifted.status).toBe(200);
      expect(lifted.body).toMatchObject({ id: created.body.id, name: 'partner', rate_limit: null });
      expect(lifted.body.key).toBeUndefined();
      // Lifting a partner's limit leaves a trace: who, which key, what it is allowed now.
      // A PATCH naming nothing changes nothing, and leaves no event.
      const nothing = await t
        .http()
        .patch(`/v1/api-keys/${created.body.id}`)
        .set('Authorization', a.admin)
        .send({});
      expect(nothing.status).toBe(200);
      const audit = await t
        .http()
        .get('/v1/audit-events?action=api_key.updated')
        .set('Authorization', a.admin);
      expect(audit.body.data).toEqual([
        expect.objectContaining({
          target: { type: 'api_key', id: created.body.id },
          details: { name: 'partner', rate_limit: null },
        }),
      ]);
      expect((await t.http().get('/v1/end-users').set('Authorization', partner)).status).toBe(200);
      for (const body of [
        { rate_limit: { rps: 0, burst: 1 } },
        { rate_limit: { rps: 1, burst: -1 } },
        { rate_limit: { rps: 1e300, burst: 1 } },
        { rate_limit: 'fast' },
        { scopes: ['admin'] },
      ]) {
        expectError(
          await t
            .http()
            .patch(`/v1/api-keys/${created.body.id}`)
            .set('Authorization', a.admin)
            .send(body),
          400,
          'validation_failed',
        );
      }
      expectError(
        await t
          .http()
          .post('/v1/api-keys')
          .set('Authorization', a.admin)
          .send({ name: 'x', scopes: ['read'], rate_limit: { rps: 1, burst: 2 ** 53 } }),
        400,
        'validation_failed',
      );
      expectError(
        await t
          .http()
          .patch('/v1/api-keys/00000000-0000-4000-8000-000000000000')
          .set('Authorization', a.admin)
          .send({ rate_limit: null }),
        404,
        'not_found',
      );
    });

    it('a rolled key keeps the bucket of the key it replaces, down a line of rolls (contract §29)', async () => {
      const a = await tenant();
      const limited = async (name: string) => {
        const created = await t
          .http()
          .post('/v1/api-keys')
          .set('Authorization', a.admin)
          .send({ name, scopes: ['read'], rate_limit: { rps: 0.01, burst: 2 } });
        expect(created.status).toBe(201);
        return { id: created.body.id as string, auth: `Bearer ${created.body.key}` };
      };
      const roll = async (id: string) => {
        const rolled = await t
          .http()
          .post(`/v1/api-keys/${id}/roll`)
          .set('Authorization', a.admin)
          .send({ expires_in_seconds: 3600 });
        expect(rolled.status).toBe(201);
        expect(rolled.body.rate_limit).toEqual({ rps: 0.01, burst: 2 });
        return { id: rolled.body.id as string, auth: `Bearer ${rolled.body.key}` };
      };
      const get = (auth: string) => t.http().get('/v1/end-users').set('Authorization', auth);
      const expectKeyRefusal = (refused: Awaited<ReturnType<typeof get>>) => {
        expectError(refused, 429, 'rate_limited');
        expect(refused.headers['ratelimit-policy']).toBe('"key";q=2;w=200');
      };

      // Two tokens in all (burst 2, one back every 100 s): one per key of the line, then none,
      // whichever key asks. No clock is moved, so this holds on Redis's clock as on ours.
      const first = await limited('partner');
      expect((await get(first.auth)).status).toBe(200);
      const second = await roll(first.id);
      expect((await get(second.auth)).status).toBe(200);
      const third = await roll(second.id);
      expectKeyRefusal(await get(third.auth));
      expectKeyRefusal(await get(first.auth));
      expectKeyRefusal(await get(second.auth));
      // A key made anew, with the same limit, has a bucket of its own.
      expect((await get((await limited('another partner')).auth)).status).toBe(200);
    });
  });

  describe('GET /v1/usage/breakdown', () => {
    it('groups the month by end user, personality, day and model, most tokens first, paged by key', async () => {
      const a = await tenant();
      const second = await clonePersonality(t, a.auth, 'sunny-coach');
      const users = [uniqueUserId('u0'), uniqueUserId('u1'), uniqueUserId('u2')];
      // u0: 3 replies, u1: 2, u2: 1, all with the first personality but one of u1's.
      for (const [index, count] of [3, 2, 1].entries()) {
        for (let i = 0; i < count; i++) {
          const to = index === 1 && i === 1 ? { ...a, personalityId: second } : a;
          expect((await reply(to, users[index])).status).toBe(200);
        }
      }
      const month = clock.now().toISOString().slice(0, 7);
      const get = (query: string) =>
        t.http().get(`/v1/usage/breakdown?month=${month}&${query}`).set('Authorization', a.auth);
      const byUser = await get('group_by=end_user&limit=2');
      expect(byUser.status).toBe(200);
      expect(byUser.body).toEqual({
        month,
        group_by: 'end_user',
        data: [
          {
            key: users[0],
            requests: 3,
            prompt_tokens: 300,
            completion_tokens: 150,
            cached_tokens: 0,
          },
          {
            key: users[1],
            requests: 2,
            prompt_tokens: 200,
            completion_tokens: 100,
            cached_tokens: 0,
          },
        ],
        has_more: true,
      });
      const next = await get(`group_by=end_user&limit=2&starting_after=${users[1]}`);
      expect(next.body.data.map((item: { key: string }) => item.key)).toEqual([users[2]]);
      expect(next.body.has_more).toBe(false);
      const byPersonality = await get('group_by=personality');
      expect(byPersonality.body.data).toEqual([
        {
          key: a.personalityId,
          requests: 5,
          prompt_tokens: 500,
          completion_tokens: 250,
          cached_tokens: 0,
        },
        { key: second, requests: 1, prompt_tokens: 100, completion_tokens: 50, cached_tokens: 0 },
      ]);
      const byDay = await get('group_by=day');
      expect(byDay.body.data).toEqual([
        {
          key: clock.now().toISOString().slice(0, 10),
          requests: 6,
          prompt_tokens: 600,
          completion_tokens: 300,
          cached_tokens: 0,
        },
      ]);
      const byModel = await get('group_by=model');
      expect(byModel.body.data).toEqual([
        {
          key: 'model-a',
          requests: 6,
          prompt_tokens: 600,
          completion_tokens: 300,
          cached_tokens: 0,
        },
      ]);
      for (const query of [
        'group_by=everything',
        'group_by=',
        '',
        'group_by=day&month=2026-13',
        'group_by=day&starting_after=yesterday',
        `group_by=day&starting_after=${month}-32`,
        'group_by=personality&starting_after=not-a-uuid',
        'group_by=end_user&limit=0',
        'group_by=end_user&limit=101',
      ]) {
        expectError(await get(query), 400, 'validation_failed');
      }

      // An erased end user's row goes with them; the organization's totals keep the tokens.
      const deleted = await t
        .http()
        .delete(`/v1/end-users/${users[0]}`)
        .set('Authorization', a.auth);
      expect(deleted.status).toBe(202);
      await t.app.get(ErasureWorker).eraseDue();
      const afterErasure = await get('group_by=end_user');
      expect(afterErasure.body.data.map((item: { key: string }) => item.key)).toEqual([
        users[1],
        users[2],
      ]);
      expect((await get('group_by=day')).body.data[0].requests).toBe(6);
      const relationships = await t
        .http()
        .get(`/v1/usage/active-relationships?month=${month}`)
        .set('Authorization', a.auth);
      expect(relationships.body.active_relationships).toBe(4);
    });
  });
});
