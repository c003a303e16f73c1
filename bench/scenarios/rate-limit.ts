import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { cpuSeconds } from '../lib/cpu';
import { type LoadFigures, load } from '../lib/load';
import { freshDatabase, type RunningService, startService } from '../lib/service';

const PUBLIC_PATH = '/v1/vocabularies/emotions/changelog';
/** An authenticated read: the org throttler (caller resolved, organization's size) plus one query. */
const KEYED_PATH = '/v1/api-keys?limit=1';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const RUN_SECONDS = Number(process.env.BENCH_RUN_SECONDS ?? 3);

/**
 * Another build's dist/main.js (e.g. the commit before a change to the limiter): measured as
 * `memory_before`, in-memory buckets, beside the others.
 */
const BEFORE_MAIN = process.env.BENCH_BEFORE_MAIN;

/** `off` twice: the second is the control, whose "cost" against the first is the noise floor. */
const ALL_VARIANTS = ['off', 'off_control', 'memory', 'redis', 'memory_before'] as const;
type Variant = (typeof ALL_VARIANTS)[number];
const VARIANTS = ALL_VARIANTS.filter((variant) => variant !== 'memory_before' || BEFORE_MAIN);

const VARIANT_ENV: Record<Variant, () => Record<string, string>> = {
  off: () => ({ RATE_LIMIT_ENABLED: 'false' }),
  off_control: () => ({ RATE_LIMIT_ENABLED: 'false' }),
  memory: () => ({}),
  redis: () => ({ REDIS_URL, RATE_LIMIT_REDIS_PREFIX: `bench-rate-limit-${randomUUID()}:` }),
  memory_before: () => ({}),
};

interface Measurement extends LoadFigures {
  /** Service CPU per request: robust to other load on the machine, unlike requests/s. */
  cpu_us_per_request: number;
}

async function measure(
  service: RunningService,
  path: string,
  headers: Record<string, string>,
): Promise<Measurement> {
  const cpuBefore = cpuSeconds(service.pid);
  const figures = await load({
    url: `${service.baseUrl}${path}`,
    headers,
    durationSeconds: RUN_SECONDS,
  });
  const cpu = cpuSeconds(service.pid) - cpuBefore;
  return { ...figures, cpu_us_per_request: Math.round((cpu * 1e6) / figures.requests) };
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function post(url: string, body: unknown, accessToken?: string) {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      ...(accessToken ? { Authorization: `Bearer ${accessToken}` } : {}),
    },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${url}: ${response.status}`);
  return (await response.json()) as Record<string, unknown>;
}

/** Checks a variant is what it claims (limiter on or off; Redis in use). */
async function check(variant: Variant, service: RunningService): Promise<void> {
  const probe = await fetch(`${service.baseUrl}${PUBLIC_PATH}`);
  if ((probe.headers.get('x-ratelimit-limit') === null) !== variant.startsWith('off')) {
    throw new Error(`the limiter is not as variant ${variant} says`);
  }
  if (variant === 'redis') {
    const ready = (await (await fetch(`${service.baseUrl}/health/ready`)).json()) as {
      checks: { rate_limit?: { store: string } };
    };
    if (ready.checks.rate_limit?.store !== 'redis') throw new Error('Redis is not in use');
  }
}

/**
 * The limiter's cost on a public endpoint (the client IP's bucket) and on an authenticated read
 * with an API key (the organization's bucket), in-memory and in Redis, against the same built
 * service with RATE_LIMIT_ENABLED=false. All four services run side by side on one database;
 * each round measures every variant for a few seconds, one after the other in rotated order, so
 * a change in the machine's load hits all variants alike; the cost is the median over rounds of
 * each round's ratio to `off`. A second `off` service measured the same way (`off_control`)
 * gives the noise floor: a cost within it is no cost this machine can see.
 * Goal: in-memory costs under 5%, Redis under 20%.
 */
export async function run(): Promise<Record<string, unknown>> {
  const database = await freshDatabase();
  const services = {} as Record<Variant, RunningService>;
  try {
    // Migrates the fresh database, so no measured start-up does.
    await (await startService({ databaseUrl: database.url })).stop();
    for (const variant of VARIANTS) {
      services[variant] = await startService({
        databaseUrl: database.url,
        env: VARIANT_ENV[variant](),
        main: variant === 'memory_before' ? BEFORE_MAIN : undefined,
      });
      await check(variant, services[variant]);
    }
    const base = services.off.baseUrl;
    const signup = await post(`${base}/v1/auth/signup`, {
      email: `bench-${randomUUID()}@example.test`,
      password: `bench password ${randomUUID()}`,
    });
    const created = await post(
      `${base}/v1/api-keys`,
      { name: 'bench', scopes: ['admin'] },
      signup.access_token as string,
    );
    const paths = {
      public: { path: PUBLIC_PATH, headers: {} },
      keyed: { path: KEYED_PATH, headers: { Authorization: `Bearer ${created.key as string}` } },
    };
    // Warm-up: JIT, caches (the key's first lookup), pools.
    for (const variant of VARIANTS) {
      for (const { path, headers } of Object.values(paths)) {
        await load({
          url: `${services[variant].baseUrl}${path}`,
          headers,
          durationSeconds: 2,
        });
      }
    }

    const results: Record<string, unknown> = {
      // Other work on the machine skews every figure; it is recorded beside them.
      load_average_at_start: loadavg().map((value) => Number(value.toFixed(2))),
      connections: 32,
      run_seconds: RUN_SECONDS,
      rounds: ROUNDS,
    };
    for (const [name, { path, headers }] of Object.entries(paths)) {
      const rounds: Array<Record<Variant, Measurement>> = [];
      for (let round = 0; round < ROUNDS; round++) {
        const shift = round % VARIANTS.length;
        const order = [...VARIANTS.slice(shift), ...VARIANTS.slice(0, shift)];
        const figures = {} as Record<Variant, Measurement>;
        for (const variant of order)
          figures[variant] = await measure(services[variant], path, headers);
        rounds.push(figures);
      }
      const cost = (variant: Variant, figure: 'requests_per_sec' | 'cpu_us_per_request') =>
        Number(
          median(
            rounds.map((r) =>
              figure === 'requests_per_sec'
                ? 1 - r[variant].requests_per_sec / r.off.requests_per_sec
                : r[variant].cpu_us_per_request / r.off.cpu_us_per_request - 1,
            ),
          ).toFixed(3),
        );
      const summary = (variant: Variant) => ({
        requests_per_sec_median: median(rounds.map((r) => r[variant].requests_per_sec)),
        cpu_us_per_request_median: median(rounds.map((r) => r[variant].cpu_us_per_request)),
        latency_p99_ms_median: median(rounds.map((r) => r[variant].latency_p99_ms)),
        errors: rounds.reduce((sum, r) => sum + r[variant].errors, 0),
        non_2xx: rounds.reduce((sum, r) => sum + r[variant].non_2xx, 0),
      });
      results[name] = {
        path,
        ...Object.fromEntries(VARIANTS.map((variant) => [variant, summary(variant)])),
        cost_requests_per_sec: {
          control: cost('off_control', 'requests_per_sec'),
          in_memory: cost('memory', 'requests_per_sec'),
          redis: cost('redis', 'requests_per_sec'),
          ...(BEFORE_MAIN ? { in_memory_before: cost('memory_before', 'requests_per_sec') } : {}),
        },
        cost_cpu_per_request: {
          control: cost('off_control', 'cpu_us_per_request'),
          in_memory: cost('memory', 'cpu_us_per_request'),
          redis: cost('redis', 'cpu_us_per_request'),
          ...(BEFORE_MAIN ? { in_memory_before: cost('memory_before', 'cpu_us_per_request') } : {}),
        },
        by_round: rounds,
      };
    }
    results.goal =
      'in-memory cost < 0.05, Redis < 0.20 (share of requests/s lost, CPU per request added), ' +
      'read against the off-vs-off control';
    return results;
  } finally {
    await Promise.all(Object.values(services).map((service) => service.stop()));
    await database.drop();
  }
}
