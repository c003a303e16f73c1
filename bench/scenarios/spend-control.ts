import { createHash, randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { Client } from 'pg';
import { startDelayProxy } from '../../test/support/delay-proxy';
import { FakeOpenAI } from '../../test/support/fake-openai';
import { FakeStripe } from '../../test/support/fake-stripe';
import { startOwnRedis } from '../../test/support/redis-server';
import { buildRevision } from '../lib/build-revision';
import { cpuSeconds } from '../lib/cpu';
import { load } from '../lib/load';
import { freshDatabase, type RunningService, startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { load1, percentile, round2, sleep } from './support/stats';

const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const ROUND_SECONDS = 8;
const MESSAGE = 'I am so happy today, thank you for listening!';
const OVERSHOOT_RUNS = 20;
const OVERSHOOT_CONCURRENCY = 50;
const REPLY_TOKENS = 150; // the fake provider's usage below: 100 prompt + 50 completion
const SEED_END_USERS = 100_000;
const BREAKDOWN_REQUESTS = 1_000;
const METER_RELATIONSHIPS = 10_000;
/** The tree before budgets were reserved in PostgreSQL: the commit this branch started from. */
const BEFORE = process.env.BENCH_BEFORE ?? 'aec333f';
const EDGE_RUNS = Number(process.env.BENCH_EDGE_RUNS ?? 20);
const EDGE_RUNS_BEFORE = 5;
const EDGE_BUDGET = 10_000;
const EDGE_REPLY_TOKENS = 1_500; // 1,000 prompt + 500 completion, as issue 28 measured
const REDIS_LATE_MS = 300;

type Tenant = Awaited<ReturnType<typeof benchTenant>>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers, read loosely
type Json = Record<string, any>;

async function call(
  method: string,
  url: string,
  auth: string,
  body?: unknown,
): Promise<{ status: number; body: Json }> {
  const response = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', authorization: auth },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Json) : {} };
}

/** An admin key of a new tenant (limits need it): its own sign-up, then a key with admin. */
async function adminTenant(baseUrl: string): Promise<Tenant & { admin: string }> {
  const signup = await call('POST', `${baseUrl}/v1/auth/signup`, '', {
    email: `bench-${randomUUID()}@example.test`,
    password: 'bench password long enough',
  });
  const token = `Bearer ${signup.body.access_token}`;
  const admin = await call('POST', `${baseUrl}/v1/api-keys`, token, {
    name: 'admin',
    scopes: ['admin'],
  });
  const auth = `Bearer ${admin.body.key}`;
  const personality = await call('POST', `${baseUrl}/v1/personalities/from-catalog`, auth, {
    slug: 'sage-mentor',
  });
  return {
    organizationId: signup.body.organization.id,
    auth,
    ownerAuth: token,
    admin: auth,
    personalityId: personality.body.id,
  };
}

let users = 0;

async function respondLoad(service: RunningService, tenant: Tenant, seconds: number) {
  const cpuBefore = cpuSeconds(service.pid);
  const figures = await load({
    url: `${service.baseUrl}/v1/respond`,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: tenant.auth },
    connections: 32,
    durationSeconds: seconds,
    requests: [
      {
        setupRequest: (request) => ({
          ...request,
          body: JSON.stringify({
            personality_id: tenant.personalityId,
            user_id: `bench-user-${users++}`,
            message: MESSAGE,
          }),
        }),
      },
    ],
  });
  const cpuMs = (cpuSeconds(service.pid) - cpuBefore) * 1000;
  return { ...figures, service_cpu_ms_per_request: round2(cpuMs / Math.max(1, figures.requests)) };
}

/**
 * Figure 1: /v1/respond (openai engine, the fake answering at once, Redis shared state) for a
 * tenant with a monthly budget, an end user daily budget and an end-user bucket (all large
 * enough never to refuse: every request pays for the checks, none is refused) against a tenant
 * without limits, on the same service, rounds alternating.
 */
async function throughput() {
  const fake = await FakeOpenAI.start();
  fake.respondAlwaysWith({ usage: { prompt_tokens: 100, completion_tokens: 50 } });
  const service = await startService({
    env: {
      RESPONSE_ENGINE: 'openai',
      OPENAI_BASE_URL: fake.url,
      OPENAI_API_KEY: 'sk-bench',
      OPENAI_MODEL: 'bench-model',
      REDIS_URL,
      RATE_LIMIT_REDIS_PREFIX: `bench-${randomUUID()}:`,
    },
  });
  try {
    const off = await adminTenant(service.baseUrl);
    const on = await adminTenant(service.baseUrl);
    const limits = await call(
      'PATCH',
      `${service.baseUrl}/v1/organizations/${on.organizationId}/limits`,
      on.admin,
      {
        monthly_token_budget: 1e15,
        end_user_daily_token_budget: 1e12,
        end_user_rate_limit: { rps: 1000, burst: 1000 },
      },
    );
    if (limits.status !== 200) throw new Error(`limits: ${limits.status}`);
    await respondLoad(service, off, 3);
    await respondLoad(service, on, 3);
    const rounds: Array<{
      load_average_1m: number;
      off: Awaited<ReturnType<typeof respondLoad>>;
      on: Awaited<ReturnType<typeof respondLoad>>;
    }> = [];
    for (let i = 0; i < ROUNDS; i++) {
      const offFigures = await respondLoad(service, off, ROUND_SECONDS);
      const onFigures = await respondLoad(service, on, ROUND_SECONDS);
      rounds.push({ load_average_1m: load1(), off: offFigures, on: onFigures });
    }
    const median = (
      side: 'off' | 'on',
      key: 'requests_per_sec' | 'latency_p99_ms' | 'latency_p50_ms' | 'service_cpu_ms_per_request',
    ) =>
      percentile(
        rounds.map((round) => round[side][key]),
        50,
      );
    const summary = (side: 'off' | 'on') => ({
      requests_per_sec: median(side, 'requests_per_sec'),
      latency_p50_ms: median(side, 'latency_p50_ms'),
      latency_p99_ms: median(side, 'latency_p99_ms'),
      service_cpu_ms_per_request: median(side, 'service_cpu_ms_per_request'),
      errors_and_non_2xx: rounds.reduce((sum, r) => sum + r[side].errors + r[side].non_2xx, 0),
    });
    const offSummary = summary('off');
    const onSummary = summary('on');
    return {
      method: `${ROUNDS} rounds of ${ROUND_SECONDS} s per side, alternating, 32 connections, a new user_id per reply; openai engine against the fake provider answering at once; REDIS_URL set (buckets in Redis, reservations in PostgreSQL)`,
      limits_on: {
        monthly_token_budget: 1e15,
        end_user_daily_token_budget: 1e12,
        end_user_rate_limit: { rps: 1000, burst: 1000 },
      },
      off: offSummary,
      on: onSummary,
      on_to_off_rps: round2(onSummary.requests_per_sec / offSummary.requests_per_sec),
      on_to_off_rps_per_round: rounds.map((r) =>
        round2(r.on.requests_per_sec / r.off.requests_per_sec),
      ),
      goal: 'on >= 0.95 of off (requests/s)',
      per_round: rounds,
    };
  } finally {
    await service.stop();
    await fake.close();
  }
}

/**
 * Figure 2: GET /v1/usage/breakdown with 1,000,000 replies in the month across 100,000 end users,
 * the rollups seeded directly (as 1,000,000 replies' statements would have left them).
 */
async function breakdown() {
  const service = await startService();
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  try {
    const tenant = await benchTenant(service.baseUrl);
    const org = tenant.organizationId;
    const month = new Date().toISOString().slice(0, 7);
    const seedStart = Date.now();
    await db.query(
      `INSERT INTO end_users (organization_id, user_id)
       SELECT $1, 'bench-user-' || g FROM generate_series(1, $2) g`,
      [org, SEED_END_USERS],
    );
    // 10 replies per end user on average (1,000,000 in all), from 1 to 19, 150 tokens each.
    await db.query(
      `INSERT INTO token_usage_end_user_months
         (organization_id, month, end_user_id, requests, prompt_tokens, completion_tokens,
          cached_tokens, total_tokens)
       SELECT $1, $2::date, e.id, r, r * 100, r * 50, r * 10, r * 150
         FROM (SELECT id, 1 + (abs(hashtext(id::text)) % 19) AS r FROM end_users
                WHERE organization_id = $1) e`,
      [org, `${month}-01`],
    );
    const [{ replies }] = (
      await db.query<{ replies: string }>(
        'SELECT sum(requests) AS replies FROM token_usage_end_user_months WHERE organization_id = $1',
        [org],
      )
    ).rows;
    await db.query(
      `INSERT INTO token_usage_personality_months
         (organization_id, month, personality_id, requests, prompt_tokens, completion_tokens,
          cached_tokens, total_tokens)
       SELECT $1, $2::date, gen_random_uuid(), 1000, 100000, 50000, 0, 150000
         FROM generate_series(1, 1000)`,
      [org, `${month}-01`],
    );
    await db.query(
      `INSERT INTO token_usage_days (organization_id, day, requests, prompt_tokens,
                                     completion_tokens, cached_tokens)
       SELECT $1, d::date, 33000, 3300000, 1650000, 0
         FROM generate_series($2::date, $2::date + interval '1 month' - interval '1 day',
                              interval '1 day') d`,
      [org, `${month}-01`],
    );
    await db.query('ANALYZE');
    const seedMs = Date.now() - seedStart;

    const base = `${service.baseUrl}/v1/usage/breakdown?month=${month}`;
    const userIds = (
      await db.query<{ user_id: string }>(
        'SELECT user_id FROM end_users WHERE organization_id = $1 ORDER BY random() LIMIT $2',
        [org, BREAKDOWN_REQUESTS],
      )
    ).rows.map((row) => row.user_id);
    const timeAll = async (urls: string[]) => {
      const ms: number[] = [];
      for (const url of urls) {
        const start = process.hrtime.bigint();
        const response = await fetch(url, { headers: { authorization: tenant.auth } });
        await response.arrayBuffer();
        if (response.status !== 200) throw new Error(`${url}: ${response.status}`);
        ms.push(Number(process.hrtime.bigint() - start) / 1e6);
      }
      return {
        requests: ms.length,
        p50_ms: round2(percentile(ms, 50)),
        p99_ms: round2(percentile(ms, 99)),
        max_ms: round2(Math.max(...ms)),
      };
    };
    // Warm-up.
    await timeAll(Array.from({ length: 50 }, () => `${base}&group_by=end_user`));
    const firstPages = await timeAll(
      Array.from({ length: BREAKDOWN_REQUESTS }, () => `${base}&group_by=end_user&limit=100`),
    );
    const anyPage = await timeAll(
      userIds.map(
        (userId) =>
          `${base}&group_by=end_user&limit=100&starting_after=${encodeURIComponent(userId)}`,
      ),
    );
    const byDay = await timeAll(Array.from({ length: 200 }, () => `${base}&group_by=day&limit=31`));
    const byPersonality = await timeAll(
      Array.from({ length: 200 }, () => `${base}&group_by=personality&limit=100`),
    );
    const plan = (
      await db.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
         SELECT e.user_id AS key, t.requests, t.prompt_tokens, t.completion_tokens, t.cached_tokens
           FROM token_usage_end_user_months t JOIN end_users e ON e.id = t.end_user_id
          WHERE t.organization_id = $1 AND t.month = $2
            AND (t.total_tokens, t.end_user_id) < (
                 SELECT c.total_tokens, c.end_user_id FROM token_usage_end_user_months c
                   JOIN end_users ce ON ce.id = c.end_user_id
                  WHERE c.organization_id = $1 AND c.month = $2 AND ce.organization_id = $1
                    AND ce.user_id = $3)
          ORDER BY t.total_tokens DESC, t.end_user_id DESC LIMIT 101`,
        [org, `${month}-01`, userIds[0]],
      )
    ).rows.map((row) => row['QUERY PLAN']);
    return {
      seeded: {
        end_users: SEED_END_USERS,
        replies_in_month: Number(replies),
        personalities: 1000,
        days: 'every day of the month',
        seed_ms: seedMs,
      },
      method: `sequential GETs over HTTP on loopback (one client), ${BREAKDOWN_REQUESTS} each: the first page of 100, and pages of 100 after a random end user (keyset: any depth costs the same)`,
      end_user_first_page: firstPages,
      end_user_page_after_random_user: anyPage,
      day: byDay,
      personality: byPersonality,
      plan_of_a_deep_page: plan,
      goal: 'p99 <= 50 ms',
    };
  } finally {
    await db.end();
    await service.stop();
  }
}

/**
 * Figure 3: 50 concurrent replies for the last 5 replies' worth of budget, 20 runs (a tenant
 * each), through Redis; the worst overshoot past the budget.
 */
async function overshoot() {
  const fake = await FakeOpenAI.start();
  fake.respondAlwaysWith({ usage: { prompt_tokens: 100, completion_tokens: 50 }, delayMs: 50 });
  const service = await startService({
    env: {
      RESPONSE_ENGINE: 'openai',
      OPENAI_BASE_URL: fake.url,
      OPENAI_API_KEY: 'sk-bench',
      OPENAI_MODEL: 'bench-model',
      ENGINE_MAX_TOKENS: '256',
      REDIS_URL,
      RATE_LIMIT_REDIS_PREFIX: `bench-${randomUUID()}:`,
    },
  });
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  try {
    const runs = [];
    for (let i = 0; i < OVERSHOOT_RUNS; i++) {
      const tenant = await adminTenant(service.baseUrl);
      const reply = (userId: string) =>
        call('POST', `${service.baseUrl}/v1/respond`, tenant.auth, {
          personality_id: tenant.personalityId,
          user_id: userId,
          message: MESSAGE,
        });
      if ((await reply(`warm-${i}`)).status !== 200) throw new Error('warm-up reply failed');
      const spentBefore = REPLY_TOKENS;
      const limit = spentBefore + 5 * REPLY_TOKENS;
      await call(
        'PATCH',
        `${service.baseUrl}/v1/organizations/${tenant.organizationId}/limits`,
        tenant.admin,
        { monthly_token_budget: limit },
      );
      const answers = await Promise.all(
        Array.from({ length: OVERSHOOT_CONCURRENCY }, (_, n) => reply(`edge-${i}-${n}`)),
      );
      const [{ used }] = (
        await db.query<{ used: string }>(
          `SELECT sum(prompt_tokens + completion_tokens) AS used FROM token_usage_months
            WHERE organization_id = $1`,
          [tenant.organizationId],
        )
      ).rows;
      runs.push({
        admitted: answers.filter((a) => a.status === 200).length,
        refused_402: answers.filter((a) => a.status === 402).length,
        other: answers.filter((a) => a.status !== 200 && a.status !== 402).length,
        used: Number(used),
        limit,
        overshoot_tokens: Math.max(0, Number(used) - limit),
      });
    }
    const worst = Math.max(...runs.map((run) => run.overshoot_tokens));
    return {
      method: `${OVERSHOOT_RUNS} runs, each a new organization: one reply, then monthly_token_budget = spent + 5 replies' worth (5 × ${REPLY_TOKENS} tokens), then ${OVERSHOOT_CONCURRENCY} concurrent replies (the fake provider answers after 50 ms with ${REPLY_TOKENS} tokens); ENGINE_MAX_TOKENS 256, REDIS_URL set; one instance`,
      worst_overshoot_tokens: worst,
      worst_overshoot_replies: round2(worst / REPLY_TOKENS),
      mean_admitted: round2(runs.reduce((sum, run) => sum + run.admitted, 0) / runs.length),
      runs,
      bound:
        'below one reply (only the last admitted reply can land past the budget; docs/spend-control.md)',
    };
  } finally {
    await db.end();
    await service.stop();
    await fake.close();
  }
}

/**
 * Figure 3b (contract §29, issue 28 finding 4): two instances sharing PostgreSQL and a Redis that
 * answers every command late (a TCP proxy holds its replies back REDIS_LATE_MS, past the 50 ms
 * RATE_LIMIT_REDIS_TIMEOUT_MS), then one that is stopped; each run a new organization with a
 * budget of 10,000 tokens and 50 concurrent replies of 1,500 tokens over both instances. The
 * worst overshoot of EDGE_RUNS runs per mode, this tree and (EDGE_RUNS_BEFORE runs) the tree
 * before the fix.
 */
async function overshootWithRedisDegraded(main: string | undefined, runs: number) {
  const fake = await FakeOpenAI.start();
  fake.respondAlwaysWith({
    usage: { prompt_tokens: 1_000, completion_tokens: 500 },
    delayMs: 100,
  });
  const redis = await startOwnRedis();
  const proxy = await startDelayProxy({ host: '127.0.0.1', port: Number(new URL(redis.url).port) });
  const env = {
    RESPONSE_ENGINE: 'openai',
    OPENAI_BASE_URL: fake.url,
    OPENAI_API_KEY: 'sk-bench',
    OPENAI_MODEL: 'bench-model',
    ENGINE_BREAKER_FAILURES: '1000',
    REDIS_URL: proxy.url,
    RATE_LIMIT_REDIS_PREFIX: `bench-${randomUUID()}:`,
  };
  const first = await startService({ env, main });
  const second = await startService({ env, main, databaseUrl: first.databaseUrl });
  const instances = [first, second];
  const db = new Client({ connectionString: first.databaseUrl });
  await db.connect();
  try {
    /** Organizations with their budget, set while Redis is well (the PATCH tells every instance). */
    const tenants = async () => {
      const made = [];
      for (let i = 0; i < runs; i++) {
        const tenant = await adminTenant(first.baseUrl);
        const limits = await call(
          'PATCH',
          `${first.baseUrl}/v1/organizations/${tenant.organizationId}/limits`,
          tenant.admin,
          { monthly_token_budget: EDGE_BUDGET },
        );
        if (limits.status !== 200) throw new Error(`limits: ${limits.status}`);
        made.push(tenant);
      }
      return made;
    };
    const edge = async (tenant: Tenant & { admin: string }, tag: string) => {
      const answers = await Promise.all(
        Array.from({ length: OVERSHOOT_CONCURRENCY }, (_, n) =>
          call('POST', `${instances[n % 2].baseUrl}/v1/respond`, tenant.auth, {
            personality_id: tenant.personalityId,
            user_id: `${tag}-${n}`,
            message: MESSAGE,
          }),
        ),
      );
      const [{ used }] = (
        await db.query<{ used: string | null }>(
          `SELECT sum(prompt_tokens + completion_tokens) AS used FROM token_usage_months
            WHERE organization_id = $1`,
          [tenant.organizationId],
        )
      ).rows;
      return {
        admitted: answers.filter((a) => a.status === 200).length,
        refused_402: answers.filter((a) => a.status === 402).length,
        other: answers.filter((a) => a.status !== 200 && a.status !== 402).length,
        used: Number(used ?? 0),
        overshoot_tokens: Math.max(0, Number(used ?? 0) - EDGE_BUDGET),
      };
    };
    const summary = (list: Array<Awaited<ReturnType<typeof edge>>>) => {
      const worst = Math.max(...list.map((run) => run.overshoot_tokens));
      return {
        runs: list.length,
        worst_overshoot_tokens: worst,
        worst_overshoot_replies: round2(worst / EDGE_REPLY_TOKENS),
        admitted: {
          min: Math.min(...list.map((run) => run.admitted)),
          max: Math.max(...list.map((run) => run.admitted)),
        },
        worst_used: Math.max(...list.map((run) => run.used)),
        non_2xx_402: list.reduce((sum, run) => sum + run.other, 0),
      };
    };
    const slow = [];
    for (const [i, tenant] of (await tenants()).entries()) {
      proxy.setDelay(REDIS_LATE_MS);
      slow.push(await edge(tenant, `slow-${i}`));
      proxy.setDelay(0);
    }
    const stoppedTenants = await tenants();
    await redis.kill();
    const stopped = [];
    for (const [i, tenant] of stoppedTenants.entries())
      stopped.push(await edge(tenant, `gone-${i}`));
    return { redis_slow: summary(slow), redis_stopped: summary(stopped) };
  } finally {
    await db.end();
    for (const service of instances.reverse()) await service.stop();
    await proxy.close();
    await redis.kill();
    await fake.close();
  }
}

async function overshootDegraded() {
  const before = buildRevision(BEFORE);
  try {
    return {
      method: `two instances of the built service sharing PostgreSQL and a Redis behind a TCP proxy (test/support/delay-proxy.ts); per run a new organization, monthly_token_budget ${EDGE_BUDGET} (set while Redis is well), then ${OVERSHOOT_CONCURRENCY} concurrent replies alternating between the instances; the fake provider answers after 100 ms reporting ${EDGE_REPLY_TOKENS} tokens; ENGINE_MAX_TOKENS 1024 (the default, so a reply's reservation covers it). redis_slow: every Redis reply held back ${REDIS_LATE_MS} ms (RATE_LIMIT_REDIS_TIMEOUT_MS is 50); redis_stopped: redis-server killed. before = ${BEFORE} built by bench/lib/build-revision.ts (${EDGE_RUNS_BEFORE} runs per mode), after = this tree (${EDGE_RUNS} runs per mode)`,
      before_revision: before.revision,
      before: await overshootWithRedisDegraded(before.main, EDGE_RUNS_BEFORE),
      after: await overshootWithRedisDegraded(undefined, EDGE_RUNS),
      bound: `at most one reply's tokens per instance past the budget (contract §29): ${2 * EDGE_REPLY_TOKENS} tokens`,
    };
  } finally {
    before.cleanup();
  }
}

/**
 * Figure 1b: what a reservation costs the database, apart from the HTTP noise of a shared
 * machine: one admission's statements in a loop on one connection (synchronous_commit off, as the
 * service's asynchronous-commit sessions), alternating in rounds with the read of the spent
 * tokens that every admission made before (the old path sent that read, then a Redis script).
 * `spend_reserve()` + the reply's release vs that read alone: microseconds per admission.
 */
async function reservationCost() {
  const service = await startService();
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  try {
    const tenant = await benchTenant(service.baseUrl);
    const org = tenant.organizationId;
    const month = `${new Date().toISOString().slice(0, 7)}-01`;
    const day = new Date().toISOString().slice(0, 10);
    const [{ id: endUserId }] = (
      await db.query<{ id: string }>(
        `INSERT INTO end_users (organization_id, user_id) VALUES ($1, 'cost-user') RETURNING id`,
        [org],
      )
    ).rows;
    await db.query(
      `INSERT INTO token_usage_months (organization_id, month, requests, prompt_tokens,
                                       completion_tokens, cached_tokens)
       VALUES ($1, $2, 1, 100, 50, 0)`,
      [org, month],
    );
    await db.query('SET synchronous_commit = off');
    const monthBudget = `month:${month}`;
    const dayBudget = `day:${day}:${endUserId}`;
    /** Time spent in each statement, summed over a round. */
    let reserveNs = 0n;
    let releaseNs = 0n;
    const reserveAndRelease = async () => {
      const id = randomUUID();
      const now = new Date();
      const started = process.hrtime.bigint();
      await db.query({
        name: 'cost_reserve',
        text: `SELECT refused_scope, counted FROM spend_reserve($1::uuid, $2::text, $3::date,
                 $4::bigint, $5::uuid, $6::text, $7::date, $8::bigint, $9::uuid, $10::integer,
                 $11::timestamptz, $12::timestamptz)`,
        values: [
          org,
          monthBudget,
          month,
          1e15,
          endUserId,
          dayBudget,
          day,
          1e12,
          id,
          1_600,
          now,
          new Date(now.getTime() + 60_000),
        ],
      });
      const reserved = process.hrtime.bigint();
      await db.query({
        name: 'cost_release',
        text: `DELETE FROM spend_reservations WHERE organization_id = $1::uuid
                 AND budget = ANY($2::text[]) AND reservation_id = $3::uuid`,
        values: [org, [monthBudget, dayBudget], id],
      });
      reserveNs += reserved - started;
      releaseNs += process.hrtime.bigint() - reserved;
    };
    const readSpent = async () => {
      await db.query({
        name: 'cost_read_spent',
        text: `SELECT (SELECT prompt_tokens + completion_tokens FROM token_usage_months
                        WHERE organization_id = $1 AND month = $2) AS month_tokens,
                      (SELECT tokens FROM end_user_token_days
                        WHERE end_user_id = $3::uuid AND day = $4::date) AS day_tokens`,
        values: [org, month, endUserId, day],
      });
    };
    const perCallUs = async (work: () => Promise<void>, calls: number) => {
      const started = process.hrtime.bigint();
      for (let i = 0; i < calls; i++) await work();
      return Number(process.hrtime.bigint() - started) / 1000 / calls;
    };
    await perCallUs(reserveAndRelease, 500);
    await perCallUs(readSpent, 500);
    const rounds: Array<{
      load_average_1m: number;
      reserve_us: number;
      release_us: number;
      read_spent_us: number;
    }> = [];
    const calls = 2_000;
    for (let round = 0; round < 6; round++) {
      reserveNs = 0n;
      releaseNs = 0n;
      await perCallUs(reserveAndRelease, calls);
      rounds.push({
        load_average_1m: load1(),
        reserve_us: round2(Number(reserveNs) / 1000 / calls),
        release_us: round2(Number(releaseNs) / 1000 / calls),
        read_spent_us: round2(await perCallUs(readSpent, calls)),
      });
    }
    const med = (key: 'reserve_us' | 'release_us' | 'read_spent_us') =>
      percentile(
        rounds.map((round) => round[key]),
        50,
      );
    return {
      method:
        '6 rounds of 2,000 sequential calls each on one connection from the bench process (loopback), alternating; both budgets set (month and day); synchronous_commit off as in the service; reserve = SELECT … FROM spend_reserve(…), round trip included; release = the DELETE a failed reply sends (a stored reply deletes inside its own statement instead, with no round trip); read_spent = the read the admission made before this change (followed then by a Redis EVALSHA, not measured here)',
      reserve_us: med('reserve_us'),
      release_us: med('release_us'),
      read_spent_us: med('read_spent_us'),
      per_round: rounds,
    };
  } finally {
    await db.end();
    await service.stop();
  }
}

/**
 * Figure 4: 10,000 new relationships' meter events delivered to the fake Stripe, the service
 * restarted (SIGTERM, a new process on the same database) in the middle of the delivery.
 */
async function meterEvents() {
  const stripe = await FakeStripe.start();
  const database = await freshDatabase();
  const env = {
    STRIPE_SECRET_KEY: 'sk_test_bench',
    STRIPE_API_BASE: stripe.baseUrl,
    STRIPE_METER_EVENT_NAME: 'active_relationships',
    STRIPE_METER_POLL_INTERVAL_MS: '200',
    STRIPE_METER_RETRY_BASE_MS: '500',
  };
  let service = await startService({ env, databaseUrl: database.url });
  const db = new Client({ connectionString: database.url });
  await db.connect();
  try {
    const tenant = await adminTenant(service.baseUrl);
    const customer = await call(
      'POST',
      `${service.baseUrl}/v1/billing/payment-methods`,
      tenant.admin,
    );
    if (customer.status !== 201) throw new Error(`payment method: ${customer.status}`);
    // Stripe down while the relationships are made: the outbox fills.
    stripe.fail('POST', /^\/v1\/billing\/meter_events$/, 503, 1_000_000_000);
    const started = Date.now();
    const figures = await load({
      url: `${service.baseUrl}/v1/respond`,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: tenant.auth },
      connections: 16,
      durationSeconds: 600,
      requests: [
        {
          setupRequest: (request) => ({
            ...request,
            body: JSON.stringify({
              personality_id: tenant.personalityId,
              user_id: `meter-user-${users++}`,
              message: MESSAGE,
            }),
          }),
        },
      ],
      amount: METER_RELATIONSHIPS,
    });
    const madeMs = Date.now() - started;
    stripe.clearFaults();
    // Back up: delivery starts; restart once about half is delivered.
    const delivered = () => stripe.meterEvents.length;
    while (delivered() < METER_RELATIONSHIPS / 2) await sleep(10);
    const atRestart = delivered();
    await service.stop();
    service = await startService({ env, databaseUrl: database.url });
    const deadline = Date.now() + 300_000;
    let pending = Infinity;
    while (Date.now() < deadline) {
      const [{ count }] = (
        await db.query<{ count: number }>(
          `SELECT count(*)::int AS count FROM meter_events WHERE status = 'pending'`,
        )
      ).rows;
      pending = count;
      if (pending === 0) break;
      await sleep(200);
    }
    const relationships = (
      await db.query<{
        organization_id: string;
        month: string;
        end_user_id: string;
        personality_id: string;
      }>(
        `SELECT organization_id, to_char(month, 'YYYY-MM') AS month, end_user_id, personality_id
           FROM relationship_months WHERE organization_id = $1`,
        [tenant.organizationId],
      )
    ).rows;
    const expected = new Set(
      relationships.map((r) =>
        createHash('sha256')
          .update(`${r.organization_id}:${r.month}:${r.end_user_id}:${r.personality_id}`)
          .digest('hex'),
      ),
    );
    const sent = stripe.meterEvents.map((event) => event.identifier);
    const sentSet = new Set(sent);
    return {
      method: `${METER_RELATIONSHIPS} replies of new end users (local engine, 16 connections) while the fake Stripe answers 503 to meter events; then Stripe back, and the service restarted (SIGTERM, a new process on the same database) once half the events were delivered`,
      replies: figures.requests,
      replies_non_2xx: figures.non_2xx + figures.errors,
      replies_made_in_ms: madeMs,
      relationships: relationships.length,
      delivered_at_restart: atRestart,
      delivered: sentSet.size,
      lost: [...expected].filter((identifier) => !sentSet.has(identifier)).length,
      duplicated_identifiers: sent.length - sentSet.size + stripe.duplicateMeterEvents,
      unexpected_identifiers: [...sentSet].filter((identifier) => !expected.has(identifier)).length,
      pending_after: pending,
      failed_attempts_during_outage:
        stripe.requestsTo('POST', /^\/v1\/billing\/meter_events$/).length -
        sent.length -
        stripe.duplicateMeterEvents,
    };
  } finally {
    await db.end();
    await service.stop();
    await database.drop();
    await stripe.close();
  }
}

export async function run(): Promise<Record<string, unknown>> {
  const only = process.env.BENCH_SPEND_PARTS?.split(',');
  const want = (part: string) => !only || only.includes(part);
  return {
    load_average_at_start: loadavg().map((n) => round2(n)),
    ...(want('throughput') ? { respond_with_limits: await throughput() } : {}),
    ...(want('cost') ? { reservation_cost: await reservationCost() } : {}),
    ...(want('breakdown') ? { breakdown: await breakdown() } : {}),
    ...(want('overshoot') ? { overshoot: await overshoot() } : {}),
    ...(want('degraded') ? { overshoot_redis_degraded: await overshootDegraded() } : {}),
    ...(want('meter') ? { meter_events: await meterEvents() } : {}),
    load_average_at_end: loadavg().map((n) => round2(n)),
  };
}
