import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { type BuiltProcess, ensureBuilt, runBuilt, waitUntilReady } from './support/built-app';
import { type DelayProxy, startDelayProxy } from './support/delay-proxy';
import { FakeOpenAI, fakeModelEnv } from './support/fake-openai';
import { freePort } from './support/ports';
import { type OwnRedis, startOwnRedis } from './support/redis-server';

/**
 * Contract §29, "Budgets hold when Redis is slow or gone": two instances of the built service
 * (`node dist/main.js`) share PostgreSQL and a Redis that answers every command late (a TCP proxy
 * holds its replies past RATE_LIMIT_REDIS_TIMEOUT_MS), that comes back in the middle of a burst,
 * or that is stopped. 50 concurrent replies at a budget's edge: the tokens spent may pass the
 * budget by at most one reply's tokens per instance.
 */

/** What the fake provider reports for every reply: 1,000 prompt + 500 completion tokens. */
const REPLY_TOKENS = 1_500;
/** Ten replies' worth would be spent by 6 or 7: a reservation (~1,650 tokens) covers a reply. */
const BUDGET = 10_000;
const CONCURRENCY = 50;
const INSTANCES = 2;
const REDIS_LATE_MS = 300;
const JWT_SECRET = `spend-degraded-${randomUUID()}-0123456789abcdef`;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers, read loosely
type Json = Record<string, any>;

async function call(base: string, method: string, path: string, auth: string, body?: unknown) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: auth },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : {}) as Json };
}

interface Instance {
  process: BuiltProcess;
  base: string;
}

describe('Token budgets when Redis is slow or gone, two built instances (contract §29)', () => {
  let redis: OwnRedis;
  let proxy: DelayProxy;
  let fake: FakeOpenAI;
  let db: Client;
  const instances: Instance[] = [];

  beforeAll(async () => {
    ensureBuilt();
    redis = await startOwnRedis();
    proxy = await startDelayProxy({ host: '127.0.0.1', port: Number(new URL(redis.url).port) });
    fake = await FakeOpenAI.start();
    db = new Client({ connectionString: process.env.DATABASE_URL });
    await db.connect();
    const prefix = `spend-degraded-${randomUUID()}:`;
    // One after the other: the first migrates the run's database.
    for (let i = 0; i < INSTANCES; i++) {
      const port = await freePort();
      const child = runBuilt('main.js', [], {
        PORT: String(port),
        METRICS_PORT: '0',
        LOG_LEVEL: 'warn',
        JWT_SECRET,
        REDIS_URL: proxy.url,
        RATE_LIMIT_REDIS_PREFIX: prefix,
        RATE_LIMIT_ORG_RPS: '10000',
        RATE_LIMIT_ORG_BURST: '10000',
        RATE_LIMIT_IP_RPS: '10000',
        RATE_LIMIT_IP_BURST: '10000',
        RATE_LIMIT_AUTH_RPS: '10000',
        RATE_LIMIT_AUTH_BURST: '10000',
        ...fakeModelEnv(fake),
      });
      instances.push({ process: child, base: `http://127.0.0.1:${port}` });
      await waitUntilReady(child, port);
    }
  }, 240_000);
  beforeEach(() => {
    proxy.setDelay(0);
    fake.reset();
    fake.respondAlwaysWith({
      usage: { prompt_tokens: 1_000, completion_tokens: 500 },
      delayMs: 100,
    });
  });
  afterAll(async () => {
    for (const instance of instances) await instance.process.stop();
    await db?.end();
    await proxy?.close();
    await fake?.close();
    await redis?.kill();
  });

  /** A new organization with an admin key and a personality, its budget set while Redis is well. */
  async function tenantWithBudget() {
    const base = instances[0].base;
    const signup = await call(base, 'POST', '/v1/auth/signup', '', {
      email: `spend-${randomUUID()}@example.test`,
      password: 'a password long enough',
    });
    expect(signup.status).toBe(201);
    const key = await call(base, 'POST', '/v1/api-keys', `Bearer ${signup.body.access_token}`, {
      name: 'admin',
      scopes: ['admin', 'read_write'],
    });
    const auth = `Bearer ${key.body.key}`;
    const personality = await call(base, 'POST', '/v1/personalities/from-catalog', auth, {
      slug: 'sage-mentor',
    });
    const organizationId = signup.body.organization.id as string;
    const limits = await call(base, 'PATCH', `/v1/organizations/${organizationId}/limits`, auth, {
      monthly_token_budget: BUDGET,
    });
    expect(limits.status).toBe(200);
    return { organizationId, auth, personalityId: personality.body.id as string };
  }
  type Tenant = Awaited<ReturnType<typeof tenantWithBudget>>;

  /** `count` concurrent replies, spread over the instances in turn. */
  const burst = (who: Tenant, count: number, tag: string) =>
    Promise.all(
      Array.from({ length: count }, (_, i) =>
        call(instances[i % INSTANCES].base, 'POST', '/v1/respond', who.auth, {
          personality_id: who.personalityId,
          user_id: `${tag}-${i}`,
          message: 'Tell me something kind.',
        }),
      ),
    );

  async function spent(who: Tenant): Promise<number> {
    const { rows } = await db.query<{ used: string | null }>(
      `SELECT sum(prompt_tokens + completion_tokens) AS used FROM token_usage_months
        WHERE organization_id = $1`,
      [who.organizationId],
    );
    return Number(rows[0]?.used ?? 0);
  }

  function expectWithinBound(answers: Array<{ status: number; body: Json }>, used: number) {
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status !== 200 && status !== 402)).toEqual([]);
    expect(statuses.filter((status) => status === 200).length).toBeGreaterThanOrEqual(1);
    expect(statuses.filter((status) => status === 402).length).toBeGreaterThanOrEqual(1);
    // The contract allows one reply's tokens past the budget per instance; with one store for
    // every instance it is less than one reply's in all.
    expect(used).toBeLessThanOrEqual(BUDGET + INSTANCES * REPLY_TOKENS);
    expect(used).toBeLessThan(BUDGET + REPLY_TOKENS);
  }

  it('holds a budget when Redis answers every command past its timeout', async () => {
    for (let run = 0; run < 3; run++) {
      const who = await tenantWithBudget();
      proxy.setDelay(REDIS_LATE_MS);
      const answers = await burst(who, CONCURRENCY, `slow-${run}`);
      proxy.setDelay(0);
      expectWithinBound(answers, await spent(who));
    }
  });

  it('counts what was reserved while Redis was slow once it answers again, in the same burst', async () => {
    for (let run = 0; run < 3; run++) {
      const who = await tenantWithBudget();
      fake.respondAlwaysWith({
        usage: { prompt_tokens: 1_000, completion_tokens: 500 },
        delayMs: 1_500,
      });
      proxy.setDelay(REDIS_LATE_MS);
      const first = burst(who, CONCURRENCY / 2, `first-${run}`);
      // The first half is reserved (and waiting on the provider) before Redis is well again.
      await fake.waitForRequests(2);
      await new Promise((resolve) => setTimeout(resolve, 2 * REDIS_LATE_MS));
      proxy.setDelay(0);
      await new Promise((resolve) => setTimeout(resolve, 2 * REDIS_LATE_MS));
      const second = burst(who, CONCURRENCY / 2, `second-${run}`);
      const answers = [...(await first), ...(await second)];
      expectWithinBound(answers, await spent(who));
      fake.reset();
    }
  });

  it('holds a budget when Redis is stopped', async () => {
    const tenants = [await tenantWithBudget(), await tenantWithBudget(), await tenantWithBudget()];
    await redis.kill();
    for (const [run, who] of tenants.entries()) {
      const answers = await burst(who, CONCURRENCY, `gone-${run}`);
      expectWithinBound(answers, await spent(who));
    }
  });
});
