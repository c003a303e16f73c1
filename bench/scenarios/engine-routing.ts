import autocannon from 'autocannon';
import Redis from 'ioredis';
import { PinoLogger } from 'nestjs-pino';
import { loadavg } from 'node:os';
import pino from 'pino';
import { Clock } from '../../src/common/time/clock';
import type { EngineConfig } from '../../src/config/engine.config';
import type { Database } from '../../src/database/database';
import { MetricsService } from '../../src/metrics/metrics.service';
import { CircuitBreakers } from '../../src/respond/engine/routing/circuit-breakers';
import { EngineMetrics } from '../../src/respond/engine/routing/engine-metrics';
import { EngineRouter } from '../../src/respond/engine/routing/engine-router';
import { EngineRoutes } from '../../src/respond/engine/routing/engine-routes';
import { freePort } from '../../test/support/ports';
import { type OwnRedis, startOwnRedis } from '../../test/support/redis-server';
import { FakeOpenAI, type FakeReply } from '../../test/support/fake-openai';
import { buildRevision } from '../lib/build-revision';
import { cpuSeconds } from '../lib/cpu';
import { type RunningService, startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { load1, median, percentile, round2, sleep } from './support/stats';

/** The tree before routing: the commit this branch started from. */
const BASE_REVISION = process.env.BENCH_BASE_REVISION ?? 'e65e502';
const FLAKY_REPLIES = 5_000;
const FLAKY_CONNECTIONS = 16;
const LATENCY_REPLIES = 500;
const CPU_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const CPU_SECONDS = 10;
const CPU_RATE = 120;
const COOLDOWN_MS = 30_000; // ENGINE_BREAKER_COOLDOWN_MS's default
const MESSAGE = 'I am so happy today, thank you for listening!';

type Tenant = Awaited<ReturnType<typeof benchTenant>>;

let users = 0;

/** One non-streamed reply: its status, the model that wrote it and the client's latency. */
async function reply(service: RunningService, tenant: Tenant) {
  const startedAt = performance.now();
  const response = await fetch(`${service.baseUrl}/v1/respond`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: tenant.auth },
    body: JSON.stringify({
      personality_id: tenant.personalityId,
      user_id: `route-user-${users++}`,
      message: MESSAGE,
    }),
  });
  const body = (await response.json()) as { model?: string; error?: { code: string } };
  return {
    status: response.status,
    model: body.model ?? body.error?.code ?? 'none',
    ms: performance.now() - startedAt,
  };
}

async function tokensByModel(service: RunningService, tenant: Tenant) {
  const response = await fetch(`${service.baseUrl}/v1/usage/tokens`, {
    headers: { authorization: tenant.auth },
  });
  const body = (await response.json()) as {
    requests: number;
    by_model: Array<{ model: string; requests: number }>;
  };
  return {
    requests: body.requests,
    by_model: Object.fromEntries(body.by_model.map((m) => [m.model, m.requests])),
  };
}

/** The engine's series from the service's /metrics. */
async function engineMetrics(port: number) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => /^engine_(requests_total|breaker_open)\{/.test(line))
    .filter((line) => !line.endsWith(' 0') || line.startsWith('engine_breaker_open'));
}

const routingEnv = (primary: FakeOpenAI, fallback: FakeOpenAI): Record<string, string> => ({
  RESPONSE_ENGINE: 'openai',
  OPENAI_BASE_URL: primary.url,
  OPENAI_API_KEY: 'bench-key',
  OPENAI_MODEL: 'primary-model',
  OPENAI_FALLBACKS: JSON.stringify([{ model: 'fallback-model', base_url: fallback.url }]),
  ENGINE_TIMEOUT_MS: '30000',
});

/**
 * Figure 1: the primary fails 20 % of calls at random (half 429 with `retry-after: 1`, half 500
 * without a wait), the fallback is healthy; 5,000 replies at 16 connections.
 */
async function flakyPrimary() {
  const primary = await FakeOpenAI.start();
  const fallback = await FakeOpenAI.start();
  let primaryFailures = 0;
  primary.respondAlwaysWith((): FakeReply => {
    const draw = Math.random();
    if (draw >= 0.2) return {};
    primaryFailures++;
    return draw < 0.1
      ? { error: { status: 429, retryAfter: '1' } }
      : { error: { status: 500, retryAfterMs: null } };
  });
  const metricsPort = await freePort();
  const service = await startService({
    env: { ...routingEnv(primary, fallback), METRICS_PORT: String(metricsPort) },
  });
  try {
    const tenant = await benchTenant(service.baseUrl);
    const loadBefore = load1();
    const outcomes: Array<Awaited<ReturnType<typeof reply>>> = [];
    let next = 0;
    const startedAt = performance.now();
    await Promise.all(
      Array.from({ length: FLAKY_CONNECTIONS }, async () => {
        while (next < FLAKY_REPLIES) {
          next++;
          outcomes.push(await reply(service, tenant));
        }
      }),
    );
    const wallMs = performance.now() - startedAt;
    const succeeded = outcomes.filter((o) => o.status === 200).length;
    const byAnswer: Record<string, number> = {};
    for (const o of outcomes)
      byAnswer[`${o.status} ${o.model}`] = (byAnswer[`${o.status} ${o.model}`] ?? 0) + 1;
    const latencies = outcomes.map((o) => o.ms);
    return {
      replies: outcomes.length,
      connections: FLAKY_CONNECTIONS,
      fake_primary:
        '20 % of calls fail at random: 429 with retry-after: 1 (10 %), 500 without (10 %)',
      engine_settings:
        'defaults: ENGINE_RETRIES=1, ENGINE_BREAKER_FAILURES=5, ENGINE_BREAKER_COOLDOWN_MS=30000',
      succeeded,
      success_rate: Number((succeeded / outcomes.length).toFixed(5)),
      answers: byAnswer,
      calls: {
        primary: primary.requests.length,
        primary_failed: primaryFailures,
        fallback: fallback.requests.length,
      },
      token_usage: await tokensByModel(service, tenant),
      service_metrics: await engineMetrics(metricsPort),
      latency_ms: {
        p50: round2(percentile(latencies, 50)),
        p90: round2(percentile(latencies, 90)),
        p99: round2(percentile(latencies, 99)),
        max: round2(Math.max(...latencies)),
      },
      wall_seconds: round2(wallMs / 1000),
      load_average_1m: [loadBefore, load1()],
      goal: '>= 99.9 % of 5,000 replies succeed',
    };
  } finally {
    await service.stop();
    await primary.close();
    await fallback.close();
  }
}

/** `count` sequential replies: client latencies. */
async function sequential(service: RunningService, tenant: Tenant, count: number) {
  const latencies: number[] = [];
  const models: Record<string, number> = {};
  for (let i = 0; i < count; i++) {
    const outcome = await reply(service, tenant);
    if (outcome.status !== 200) throw new Error(`reply ${i}: ${outcome.status} ${outcome.model}`);
    latencies.push(outcome.ms);
    models[outcome.model] = (models[outcome.model] ?? 0) + 1;
  }
  return {
    replies: count,
    answered_by: models,
    p50_ms: round2(percentile(latencies, 50)),
    p90_ms: round2(percentile(latencies, 90)),
    p99_ms: round2(percentile(latencies, 99)),
  };
}

/**
 * Figure 2: latency with a healthy primary, then with the primary down and its breaker open
 * (sequential replies, one connection); then no call to the primary until the cool-down ends,
 * when one probe goes.
 */
async function openBreaker() {
  const primary = await FakeOpenAI.start();
  const fallback = await FakeOpenAI.start();
  const service = await startService({ env: routingEnv(primary, fallback) });
  try {
    const tenant = await benchTenant(service.baseUrl);
    await sequential(service, tenant, 100); // warm-up: JIT, pool, the primary's keep-alive
    // The fallback's client too: 2 replies fail over (4 failed attempts, one short of opening),
    // then successes start the count over.
    primary.respondAlwaysWith({ error: { status: 503 } });
    await sequential(service, tenant, 2);
    primary.respondAlwaysWith({});
    await sequential(service, tenant, 20);
    primary.reset();
    fallback.reset();
    const healthy = await sequential(service, tenant, LATENCY_REPLIES);
    if (healthy.answered_by['primary-model'] !== LATENCY_REPLIES) {
      throw new Error(`the healthy primary did not answer: ${JSON.stringify(healthy)}`);
    }

    // The primary goes down: 5 failed attempts in a row (3 replies, a retry each) open it.
    primary.reset();
    primary.respondAlwaysWith({ error: { status: 503 } });
    for (let i = 0; i < 3; i++) await reply(service, tenant);
    const callsToOpen = primary.requests.length;
    const openedAt = performance.now();
    primary.reset();
    // Healthy again, but nobody should know until the cool-down ends.
    primary.respondAlwaysWith({});
    const open = await sequential(service, tenant, LATENCY_REPLIES);
    const callsDuringMeasure = primary.requests.length;
    const measuredOpenForMs = performance.now() - openedAt;

    // A reply every 100 ms until the primary is called again.
    let replies = 0;
    while (primary.requests.length === 0 && performance.now() - openedAt < COOLDOWN_MS + 10_000) {
      await reply(service, tenant);
      replies++;
      await sleep(100);
    }
    const firstCallAfterMs = primary.requests.length > 0 ? performance.now() - openedAt : null;
    const after = await sequential(service, tenant, 20);
    return {
      method:
        'sequential non-streamed replies on one connection; both fakes answer at once; primary healthy, then down (503) until its breaker opened, then healthy again but unknown to the breaker',
      healthy_primary: healthy,
      primary_breaker_open: open,
      p50_difference_ms: round2(open.p50_ms - healthy.p50_ms),
      calls_to_the_primary: {
        that_opened_the_breaker: callsToOpen,
        during_the_open_measurement: callsDuringMeasure,
        open_measurement_ended_after_opening_ms: Math.round(measuredOpenForMs),
        replies_sent_until_the_next_call: replies,
        first_call_after_opening_ms: firstCallAfterMs && Math.round(firstCallAfterMs),
        cooldown_ms: COOLDOWN_MS,
        after_the_probe: after.answered_by,
      },
      goals: {
        p50: 'open breaker within 5 ms of a healthy primary',
        calls: 'no call to the primary until the cool-down ends',
      },
    };
  } finally {
    await service.stop();
    await primary.close();
    await fallback.close();
  }
}

/**
 * `seconds` of non-streamed replies at a fixed rate (so that both services batch alike: CPU per
 * reply of a closed loop depends on how far the machine lets it run), a new user_id each.
 */
async function cpuPerReply(service: RunningService, tenant: Tenant, seconds = CPU_SECONDS) {
  const before = cpuSeconds(service.pid);
  const result = await autocannon({
    url: `${service.baseUrl}/v1/respond`,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: tenant.auth },
    connections: 16,
    overallRate: CPU_RATE,
    duration: seconds,
    requests: [
      {
        setupRequest: (request) => ({
          ...request,
          body: JSON.stringify({
            personality_id: tenant.personalityId,
            user_id: `cpu-user-${users++}`,
            message: MESSAGE,
          }),
        }),
      },
    ],
  });
  const cpuMs = (cpuSeconds(service.pid) - before) * 1000;
  return {
    replies: result.requests.total,
    latency_p50_ms: result.latency.p50,
    errors_and_non_2xx: result.errors + result.timeouts + result.non2xx,
    cpu_ms_per_reply: Number((cpuMs / Math.max(1, result.requests.total)).toFixed(3)),
  };
}

/**
 * Figure 3a: the happy path's service CPU per reply, this tree against the tree before routing
 * (BASE_REVISION, built beside it); one fake provider answering at once; both services running,
 * measured in turn at the same fixed rate.
 */
async function happyPathCpu() {
  const fake = await FakeOpenAI.start();
  const base = buildRevision(BASE_REVISION);
  const services: Record<string, RunningService> = {};
  try {
    const env = {
      RESPONSE_ENGINE: 'openai',
      OPENAI_BASE_URL: fake.url,
      OPENAI_API_KEY: 'bench-key',
      OPENAI_MODEL: 'gpt-bench',
      ENGINE_TIMEOUT_MS: '30000',
    };
    services.before_routing = await startService({ env, main: base.main });
    services.routing = await startService({ env });
    const names = Object.keys(services);
    const tenants: Record<string, Tenant> = {};
    for (const name of names) {
      tenants[name] = await benchTenant(services[name].baseUrl);
      await cpuPerReply(services[name], tenants[name], 5); // warm-up
    }
    type Figures = Awaited<ReturnType<typeof cpuPerReply>>;
    const rounds: Array<{ load_average_1m: number; before_routing: Figures; routing: Figures }> =
      [];
    for (let round = 0; round < CPU_ROUNDS; round++) {
      const figures: Record<string, Figures> = {};
      // Alternating order, so each meets the neighbours' load about equally.
      for (let i = 0; i < names.length; i++) {
        const name = names[(round + i) % names.length];
        figures[name] = await cpuPerReply(services[name], tenants[name]);
      }
      rounds.push({
        load_average_1m: load1(),
        before_routing: figures.before_routing,
        routing: figures.routing,
      });
    }
    const of = (name: 'before_routing' | 'routing') => rounds.map((r) => r[name].cpu_ms_per_reply);
    const ratios = rounds.map(
      (r) => r.routing.cpu_ms_per_reply / r.before_routing.cpu_ms_per_reply,
    );
    return {
      method: `${CPU_ROUNDS} rounds; in each, ${CPU_SECONDS} s of non-streamed replies at a fixed ${CPU_RATE}/s (16 connections, a new user_id per reply) on each built service in turn, order alternating: before_routing = ${BASE_REVISION} built by bench/lib/build-revision.ts, routing = this tree; both without Redis (the bench's services run without it); service CPU = utime + stime from /proc/<pid>/stat over the window`,
      base_revision: base.revision,
      cpu_ms_per_reply: {
        before_routing: {
          median: median(of('before_routing')),
          min: Math.min(...of('before_routing')),
        },
        routing: { median: median(of('routing')), min: Math.min(...of('routing')) },
      },
      ratio_routing_to_before: {
        median_of_rounds: Number(median(ratios).toFixed(4)),
        of_medians: Number((median(of('routing')) / median(of('before_routing'))).toFixed(4)),
        of_minimums: Number(
          (Math.min(...of('routing')) / Math.min(...of('before_routing'))).toFixed(4),
        ),
      },
      errors_and_non_2xx: rounds.reduce(
        (sum, r) => sum + r.routing.errors_and_non_2xx + r.before_routing.errors_and_non_2xx,
        0,
      ),
      per_round: rounds,
      goal: 'routing within 3 % of before_routing (ratio <= 1.03)',
    };
  } finally {
    for (const service of Object.values(services)) await service.stop();
    await fake.close();
    base.cleanup();
  }
}

/**
 * Figure 3b: the routing layer's own work per reply, in this process, without the noise of a
 * service: EngineRouter.run (routes, breaker admission and success, metrics) around an attempt
 * that answers at once, against calling the attempt directly.
 */
async function routingLayerCpu() {
  const engine: EngineConfig = {
    engine: 'openai',
    openaiBaseUrl: 'http://primary.bench/v1',
    openaiApiKey: 'bench-key',
    openaiModel: 'gpt-bench',
    fallbacks: [{ model: 'fallback', baseUrl: 'http://fallback.bench/v1', apiKey: 'bench-key' }],
    timeoutMs: 30_000,
    historyMessages: 20,
    retries: 1,
    breakerFailures: 5,
    breakerCooldownMs: 30_000,
    maxTokens: 1024,
  };
  const logger = new PinoLogger({ pinoHttp: pino({ level: 'silent' }) });
  const clock = new Clock();
  const metricsService = new MetricsService(
    { metricsPort: 0, metricsHost: undefined, tracing: false },
    { pool: {} } as Database,
    logger,
    'server',
  );
  const router = new EngineRouter(
    new EngineRoutes(engine),
    new CircuitBreakers(engine, clock, logger, null, metricsService),
    new EngineMetrics(metricsService),
    clock,
    { engine: 'openai', retries: 1, timeoutMs: 30_000 },
  );
  const signal = new AbortController().signal;
  const attempt = () => Promise.resolve('reply');
  const measure = async (work: () => Promise<unknown>, count: number) => {
    const before = process.cpuUsage();
    for (let i = 0; i < count; i++) await work();
    const used = process.cpuUsage(before);
    return ((used.user + used.system) / count) * 1000; // ns per call
  };
  const client = { delivered: () => false, waitingOnClient: () => false };
  const routed = () => router.run(null, signal, client, attempt);
  const direct = () => attempt();
  await measure(routed, 50_000);
  await measure(direct, 50_000);
  const routedNs: number[] = [];
  const directNs: number[] = [];
  for (let i = 0; i < 5; i++) {
    routedNs.push(await measure(routed, 200_000));
    directNs.push(await measure(direct, 200_000));
  }
  const addedUs = (median(routedNs) - median(directNs)) / 1000;
  return {
    method:
      'process.cpuUsage() over 200,000 sequential calls, 5 alternating runs (medians): EngineRouter.run with the breakers of this instance (no Redis) and the metrics, around an attempt that resolves at once, minus the attempt alone',
    routed_ns_per_reply: Math.round(median(routedNs)),
    direct_ns_per_reply: Math.round(median(directNs)),
    added_us_per_reply: round2(addedUs),
  };
}

/**
 * Figure 3c: what the shared breaker asks of Redis on the happy path: the commands a service
 * with REDIS_URL sends to a Redis of its own (rate limiter off, so they are the breaker's) per
 * reply, at the fixed rate of 3a.
 */
async function happyPathRedis() {
  const fake = await FakeOpenAI.start();
  const redis: OwnRedis = await startOwnRedis();
  let service: RunningService | undefined;
  const client = new Redis(redis.url);
  try {
    service = await startService({
      env: {
        RESPONSE_ENGINE: 'openai',
        OPENAI_BASE_URL: fake.url,
        OPENAI_MODEL: 'gpt-bench',
        REDIS_URL: redis.url,
        RATE_LIMIT_ENABLED: 'false',
      },
    });
    const tenant = await benchTenant(service.baseUrl);
    await cpuPerReply(service, tenant, 3);
    const commands = async () => {
      const info = await client.info('commandstats');
      return Object.fromEntries(
        [...info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)].map((m) => [m[1], Number(m[2])]),
      );
    };
    const before = await commands();
    const figures = await cpuPerReply(service, tenant);
    const after = await commands();
    const used = Object.fromEntries(
      Object.keys(after)
        .filter((name) => !['info'].includes(name) && after[name] > (before[name] ?? 0))
        .map((name) => [name, after[name] - (before[name] ?? 0)]),
    );
    const breakerCalls =
      (used.evalsha ?? 0) + (used.eval ?? 0) + (used.del ?? 0) + (used.hdel ?? 0);
    return {
      method: `${CPU_SECONDS} s at ${CPU_RATE} replies/s on one instance, a healthy provider; Redis INFO commandstats before and after`,
      replies: figures.replies,
      redis_commands: used,
      breaker_commands_per_reply: Number((breakerCalls / Math.max(1, figures.replies)).toFixed(4)),
      expected: 'one EVALSHA (a read of the shared state) per route every 250 ms: 4/s',
    };
  } finally {
    client.disconnect();
    await service?.stop();
    await redis.kill();
    await fake.close();
  }
}

/**
 * The model path that does not fail the user (§21), against the tests' fake provider in this
 * process: a flaky primary with a healthy fallback, the latency and calls of an open breaker,
 * and what the routing layer costs on the happy path.
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadavg().map(round2);
  const only = process.env.BENCH_ONLY?.split(',');
  const want = (name: string) => !only || only.includes(name);
  const figures: Record<string, unknown> = { load_average_at_start: loadAtStart };
  if (want('flaky')) figures.flaky_primary = await flakyPrimary();
  if (want('open')) figures.open_breaker = await openBreaker();
  if (want('cpu')) figures.happy_path_cpu = await happyPathCpu();
  if (want('layer')) figures.routing_layer_cpu = await routingLayerCpu();
  if (want('redis')) figures.happy_path_redis = await happyPathRedis();
  figures.load_average_at_end = loadavg().map(round2);
  return figures;
}
