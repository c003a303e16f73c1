import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { expectError } from './support/assertions';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { FakeOpenAI, fakeModelEnv } from './support/fake-openai';
import { createApiKey, tenantWithKey } from './support/identity';
import type { TestApp } from './support/test-app';
import { startTwoInstances, type TwoInstances } from './support/two-instances';

const REPLY_TOKENS = 150;

/**
 * Two instances sharing one database and one Redis: budgets (reserved in the database) and end
 * users' buckets (in Redis) are shared. When Redis is slow or gone: spend-redis-degraded.
 */
describe('Spend control across instances through Redis (contract §23)', () => {
  let fake: FakeOpenAI;
  let instances: TwoInstances;
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    fake = await FakeOpenAI.start();
    instances = await startTwoInstances({
      env: {
        // One prefix: the instances share buckets and reservations, as in production.
        RATE_LIMIT_REDIS_PREFIX: `spend-${randomUUID()}:`,
        ...fakeModelEnv(fake),
        ENGINE_MAX_TOKENS: '64',
      },
      channels: ['spend:limits-changed'],
    });
    ({ a, b } = instances);
  });
  beforeEach(() => {
    fake.reset();
    fake.respondAlwaysWith({ usage: { prompt_tokens: 100, completion_tokens: 50 }, delayMs: 50 });
  });
  afterAll(async () => {
    await instances?.close();
    await fake.close();
  });

  async function tenant() {
    const owner = await tenantWithKey(a, ['read_write']);
    const admin = `Bearer ${await createApiKey(a, owner.accessToken, ['admin'], 'admin key')}`;
    return { ...owner, admin, personalityId: await clonePersonality(a, owner.auth) };
  }
  type Tenant = Awaited<ReturnType<typeof tenant>>;

  const reply = (on: TestApp, who: Tenant, userId: string) =>
    on
      .http()
      .post('/v1/respond')
      .set('Authorization', who.auth)
      .send({ personality_id: who.personalityId, user_id: userId, message: 'hi' })
      .then((response) => response);

  const setLimits = (on: TestApp, who: Tenant, body: Record<string, unknown>) =>
    on
      .http()
      .patch(`/v1/organizations/${who.organizationId}/limits`)
      .set('Authorization', who.admin)
      .send(body);

  async function used(who: Tenant): Promise<number> {
    const rows = await a.app.get(DataSource).query<Array<{ used: string }>>(
      `SELECT sum(prompt_tokens + completion_tokens) AS used FROM token_usage_months
          WHERE organization_id = $1`,
      [who.organizationId],
    );
    return Number(rows[0]?.used ?? 0);
  }

  it('shares one budget: 50 concurrent replies over two instances overshoot it by less than one reply', async () => {
    const who = await tenant();
    const limit = 5 * REPLY_TOKENS;
    expect((await setLimits(a, who, { monthly_token_budget: limit })).status).toBe(200);
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => reply(i % 2 === 0 ? a : b, who, uniqueUserId(`r${i}`))),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status !== 200 && status !== 402)).toEqual([]);
    const admitted = statuses.filter((status) => status === 200).length;
    expect(admitted).toBeGreaterThanOrEqual(1);
    // Without shared reservations each instance would admit its own share of the 50 at once.
    expect((await used(who)) - limit).toBeLessThan(REPLY_TOKENS);
    const refusal = answers.find((answer) => answer.status === 402);
    if (refusal) {
      expect(refusal.body.error.details).toMatchObject({ scope: 'organization', limit });
    }
  });

  it('a budget lowered on A refuses the next reply on B at once', async () => {
    const who = await tenant();
    await setLimits(a, who, { monthly_token_budget: 100 * REPLY_TOKENS });
    const userId = uniqueUserId();
    expect((await reply(b, who, userId)).status).toBe(200);
    expect((await reply(b, who, userId)).status).toBe(200);
    expect((await setLimits(a, who, { monthly_token_budget: REPLY_TOKENS })).status).toBe(200);
    expectError(await reply(b, who, userId), 402, 'budget_exceeded');
  });

  it("shares an end user's daily budget and bucket between the instances", async () => {
    const who = await tenant();
    await setLimits(a, who, {
      end_user_daily_token_budget: 2 * REPLY_TOKENS,
      end_user_rate_limit: { rps: 0.01, burst: 3 },
    });
    const userId = uniqueUserId();
    expect((await reply(a, who, userId)).status).toBe(200);
    expect((await reply(b, who, userId)).status).toBe(200);
    const spent = await reply(a, who, userId);
    expectError(spent, 402, 'budget_exceeded');
    expect(spent.body.error.details).toMatchObject({ scope: 'end_user', used: 2 * REPLY_TOKENS });
    // The fourth request of the end user, on B, finds the bucket the three before emptied.
    const limited = await reply(b, who, userId);
    expectError(limited, 429, 'rate_limited');
    expect(limited.headers['ratelimit-policy']).toBe('"end_user";q=3;w=300');
  });
});
