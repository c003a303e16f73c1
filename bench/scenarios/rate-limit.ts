import { randomUUID } from 'node:crypto';
import { type LoadFigures, load } from '../lib/load';
import { freshDatabase, type RunningService, startService } from '../lib/service';
import { cpuSeconds } from '../lib/cpu';

const PATH = '/v1/vocabularies/emotions/changelog';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = 3;

type Variant = 'off' | 'memory' | 'redis';

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */

interface Measurement extends LoadFigures {
  /** Service CPU per request: robust to other load on the machine, unlike requests/s. */
  cpu_us_per_request: number;
}

async function measure(service: RunningService): Promise<Measurement> {
  const cpuBefore = cpuSeconds(service.pid);
  const figures = await load({ url: `${service.baseUrl}${PATH}` });
  const cpu = cpuSeconds(service.pid) - cpuBefore;
  return { ...figures, cpu_us_per_request: Math.round((cpu * 1e6) / figures.requests) };
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const VARIANT_ENV: Record<Variant, () => Record<string, string>> = {
  off: () => ({ RATE_LIMIT_ENABLED: 'false' }),
  memory: () => ({}),
  redis: () => ({ REDIS_URL, RATE_LIMIT_REDIS_PREFIX: `bench-rate-limit-${randomUUID()}:` }),
};

/** Starts one variant alone, checks it is what it claims, warms it up, measures it, stops it. */
async function measureVariant(variant: Variant, databaseUrl: string): Promise<Measurement> {
  const service = await startService({ databaseUrl, env: VARIANT_ENV[variant]() });
  try {
    const probe = await fetch(`${service.baseUrl}${PATH}`);
    if ((probe.headers.get('x-ratelimit-limit') === null) !== (variant === 'off')) {
      throw new Error(`the limiter is ${variant === 'off' ? 'on' : 'off'} in variant ${variant}`);
    }
    if (variant === 'redis') {
      const ready = (await (await fetch(`${service.baseUrl}/health/ready`)).json()) as {
        checks: { rate_limit?: { store: string } };
      };
      if (ready.checks.rate_limit?.store !== 'redis') throw new Error('Redis is not in use');
    }
    await load({ url: `${service.baseUrl}${PATH}`, durationSeconds: 3 });
    return await measure(service);
  } finally {
    await service.stop();
  }
}

/**
 * The limiter's cost on a public endpoint (the client IP's bucket): the same built service with
 * RATE_LIMIT_ENABLED=false, with in-memory buckets, and with buckets in Redis (one Lua script
 * per request; keys under a prefix of their own, expiring within milliseconds since the
 * harness's buckets are huge). One service at a time (two identical services running side by
 * side measured up to 40% apart here), on one database, over three rounds in rotated order; each
 * round compares variants measured within a minute, and the median round is reported, so that
 * other load on a shared machine decides less. Besides requests/s, the service's CPU time per
 * request (Redis's own CPU not included).
 * Goal: in-memory costs under 5% of requests/s, Redis under 20%.
 */
export async function run(): Promise<Record<string, unknown>> {
  const database = await freshDatabase();
  try {
    // Migrates the fresh database, so no measured start-up does.
    await (await startService({ databaseUrl: database.url })).stop();
    const variants: Variant[] = ['off', 'memory', 'redis'];
    const rounds: Array<Record<Variant, Measurement>> = [];
    for (let round = 0; round < ROUNDS; round++) {
      const order = [...variants.slice(round % 3), ...variants.slice(0, round % 3)];
      const figures = {} as Record<Variant, Measurement>;
      for (const variant of order) figures[variant] = await measureVariant(variant, database.url);
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
    return {
      path: PATH,
      connections: 32,
      duration_seconds: 10,
      rounds: ROUNDS,
      limiter_off: summary('off'),
      in_memory: summary('memory'),
      redis: summary('redis'),
      cost_in_memory_requests_per_sec: cost('memory', 'requests_per_sec'),
      cost_redis_requests_per_sec: cost('redis', 'requests_per_sec'),
      cost_in_memory_cpu_per_request: cost('memory', 'cpu_us_per_request'),
      cost_redis_cpu_per_request: cost('redis', 'cpu_us_per_request'),
      by_round: rounds,
      goal: 'cost_in_memory < 0.05, cost_redis < 0.20 (share of requests/s lost), zero errors',
    };
  } finally {
    await database.drop();
  }
}
