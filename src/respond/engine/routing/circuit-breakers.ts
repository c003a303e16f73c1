import { Inject, Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { createHash } from 'node:crypto';
import { Clock } from '../../../common/time/clock';
import { type EngineConfig, engineConfig } from '../../../config/engine.config';
import { MetricsService } from '../../../metrics/metrics.service';
import { REDIS_CLIENT, type RedisClient } from '../../../redis/redis.module';
import {
  type Admission,
  type BreakerPolicy,
  LocalBreaker,
  type SharedView,
} from './circuit-breaker';

/** A route as its breaker knows it. */
export interface BreakerRoute {
  /** Base URL and model: one breaker each. */
  readonly key: string;
  /** `model@base-url`, credentials left out: the metric's label. */
  readonly label: string;
  /** OPENAI_MODEL or a fallback: its gauge series is kept while closed, too. */
  readonly configured: boolean;
}

/**
 * How long this instance decides from its copy of the shared state before asking Redis again:
 * the happy path asks Redis at most this often per route, and another instance's opening of a
 * breaker reaches this one within it.
 */
export const SHARED_STATE_TTL_MS = 250;
/** A Redis call of the breaker that takes longer is abandoned for this instance's copy. */
export const BREAKER_REDIS_TIMEOUT_MS = 50;
/** A breaker's key lives this long after its last failure (plus the cool-down), then resets. */
const KEY_IDLE_TTL_MS = 600_000;
/** Routes this instance keeps a breaker for; past it, closed ones without failures are dropped. */
const ROUTES_MAX = 1_000;
/** Series of engine_breaker_open at most (a personality's model is any string). */
const GAUGE_SERIES_MAX = 100;
const WARN_INTERVAL_MS = 60_000;

/**
 * ADMIT(key; leaseMs). Closed (no open_until): pass. Open: skip, with the time left. Half-open:
 * the first caller takes the probe's lease and probes; the others skip until it ends.
 * Redis's clock decides, so instances whose clocks disagree share one cool-down.
 */
const ADMIT_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'failures', 'open_until', 'probe_until')
local failures = tonumber(s[1]) or 0
local openUntil = tonumber(s[2]) or 0
local probeUntil = tonumber(s[3]) or 0
if openUntil == 0 then return { 'closed', failures, 0 } end
if now < openUntil then return { 'open', failures, openUntil - now } end
if now < probeUntil then return { 'probing', failures, probeUntil - now } end
local lease = tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'probe_until', string.format('%d', now + lease))
return { 'probe', failures, lease }
`;

/**
 * FAIL(key; threshold, cooldownMs, keyTtlMs, wasProbe): one more failure in a row; opens the
 * breaker when they reach the threshold, when a probe failed, or when it was half-open.
 */
const FAIL_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
local openUntil = tonumber(redis.call('HGET', KEYS[1], 'open_until')) or 0
local threshold = tonumber(ARGV[1])
local cooldown = tonumber(ARGV[2])
if ARGV[4] == '1' or (openUntil == 0 and failures >= threshold) or (openUntil > 0 and now >= openUntil) then
  openUntil = now + cooldown
  redis.call('HSET', KEYS[1], 'open_until', string.format('%d', openUntil))
  redis.call('HDEL', KEYS[1], 'probe_until')
end
redis.call('PEXPIRE', KEYS[1], cooldown + tonumber(ARGV[3]))
if openUntil > now then return { 'open', failures, openUntil - now } end
return { 'closed', failures, 0 }
`;

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');
const ADMIT_SHA = sha1(ADMIT_SCRIPT);
const FAIL_SHA = sha1(FAIL_SCRIPT);

class BreakerTimeout extends Error {
  constructor() {
    super(`Redis did not answer within ${BREAKER_REDIS_TIMEOUT_MS} ms`);
  }
}

interface RouteBreaker {
  route: BreakerRoute;
  redisKey: string;
  local: LocalBreaker;
  /** When the local copy last took the shared state (clock ms); -Infinity: never. */
  syncedAt: number;
  /** A shared admission under way: callers meanwhile decide from its answer. */
  pending: Promise<void> | null;
}

/**
 * The circuit breakers of the engine's routes (§21). Without REDIS_URL each instance keeps its
 * own (LocalBreaker). With it the state is one hash per route in Redis, updated atomically by
 * Lua scripts, and each instance keeps a copy it decides from for SHARED_STATE_TTL_MS:
 *
 * - happy path: at most one Redis read per route every 250 ms per instance; a success writes
 *   only when there were failures to forget;
 * - an open breaker whose cool-down end is known skips without asking Redis (a skipped route
 *   costs no network call at all);
 * - a failure is written at once (its answer tells whether the breaker opened).
 *
 * Redis lost (down, or slower than BREAKER_REDIS_TIMEOUT_MS): the instance decides from its copy,
 * which holds what it last saw of the shared state (an open breaker stays open until the cool-down
 * it knew of ends) plus its own failures since: each instance then has its own breaker, as without
 * Redis, and probes on its own once the cool-down ends. When Redis answers again the shared state
 * takes over. Logged at most once a minute.
 */
@Injectable()
export class CircuitBreakers {
  private readonly policy: BreakerPolicy;
  private readonly breakers = new Map<string, RouteBreaker>();
  private degradedSince: number | null = null;
  private lastWarnAt = -Infinity;

  constructor(
    @Inject(engineConfig.KEY) engine: EngineConfig,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    metrics: MetricsService,
  ) {
    this.logger.setContext(CircuitBreakers.name);
    this.policy = {
      failures: engine.breakerFailures,
      cooldownMs: engine.breakerCooldownMs,
      // A probe is one attempt: it ends (or the reply's time runs out) within ENGINE_TIMEOUT_MS.
      probeLeaseMs: engine.timeoutMs + 1_000,
    };
    const breakers = this.breakers;
    const clockOf = this.clock;
    metrics.gauge({
      name: 'engine_breaker_open',
      help: 'Whether the circuit breaker of an engine route (model@base-url) is open or half-open (1) or closed (0)',
      labelNames: ['route'],
      collect() {
        this.reset();
        const now = clockOf.nowMs();
        let series = 0;
        for (const { route, local } of breakers.values()) {
          const open = local.state(now) !== 'closed';
          if (!open && !route.configured) continue;
          if (series++ >= GAUGE_SERIES_MAX) break;
          this.set({ route: route.label }, open ? 1 : 0);
        }
      },
    });
  }

  /** Makes the route known (its gauge series reads 0 from the start). */
  register(route: BreakerRoute): void {
    this.breakerOf(route);
  }

  /** Whether a request may use the route: pass, probe (the one request of a half-open breaker) or skip. */
  async admit(route: BreakerRoute): Promise<Admission> {
    const breaker = this.breakerOf(route);
    const redis = this.usableRedis();
    const now = this.clock.nowMs();
    if (!redis) return breaker.local.admit(now);
    const state = breaker.local.state(now);
    if (state === 'open') return 'skip';
    if (state === 'closed' && now - breaker.syncedAt < SHARED_STATE_TTL_MS) return 'pass';
    // Half-open, or a copy too old to trust: ask Redis, once for all callers of the moment.
    if (breaker.pending) {
      await breaker.pending;
      return this.fromCopy(breaker);
    }
    let admission: Admission | undefined;
    breaker.pending = this.call(redis, ADMIT_SHA, ADMIT_SCRIPT, breaker.redisKey, [
      String(this.policy.probeLeaseMs),
    ]).then(
      (view) => {
        breaker.local.follow(view, this.clock.nowMs());
        breaker.syncedAt = this.clock.nowMs();
        admission = view.state === 'probe' ? 'probe' : view.state === 'closed' ? 'pass' : 'skip';
      },
      (error: unknown) => {
        this.failedRedis(error);
        admission = breaker.local.admit(this.clock.nowMs());
      },
    );
    try {
      await breaker.pending;
    } finally {
      breaker.pending = null;
    }
    return admission!;
  }

  /** A failed attempt on the route (a probe's included); resolves once Redis has it, or gave up. */
  async failed(route: BreakerRoute, admission: Admission): Promise<void> {
    const breaker = this.breakerOf(route);
    breaker.local.failed(this.clock.nowMs(), admission);
    const redis = this.usableRedis();
    if (!redis) return;
    try {
      const view = await this.call(redis, FAIL_SHA, FAIL_SCRIPT, breaker.redisKey, [
        String(this.policy.failures),
        String(this.policy.cooldownMs),
        String(KEY_IDLE_TTL_MS),
        admission === 'probe' ? '1' : '0',
      ]);
      const now = this.clock.nowMs();
      breaker.local.follow(view, now);
      breaker.syncedAt = now;
    } catch (error) {
      this.failedRedis(error);
    }
  }

  /** The route answered: its failures in a row are forgotten, here and (when any) in Redis. */
  succeeded(route: BreakerRoute, admission: Admission): void {
    const breaker = this.breakerOf(route);
    const hadFailures =
      breaker.local.failures > 0 ||
      admission === 'probe' ||
      breaker.local.state(this.clock.nowMs()) !== 'closed';
    breaker.local.succeeded();
    const redis = this.usableRedis();
    if (!redis || !hadFailures) return;
    this.withTimeout(redis.del(breaker.redisKey)).catch((error: unknown) =>
      this.failedRedis(error),
    );
  }

  /** The attempt ended without a word about the route (the client left, a 400): frees a probe. */
  released(route: BreakerRoute, admission: Admission): void {
    if (admission !== 'probe') return;
    const breaker = this.breakerOf(route);
    breaker.local.released(admission);
    const redis = this.usableRedis();
    if (!redis) return;
    this.withTimeout(redis.hdel(breaker.redisKey, 'probe_until')).catch((error: unknown) =>
      this.failedRedis(error),
    );
  }

  /** The state of a route's breaker on this instance (its copy of the shared one with Redis). */
  state(route: BreakerRoute) {
    return this.breakerOf(route).local.state(this.clock.nowMs());
  }

  private fromCopy(breaker: RouteBreaker): Admission {
    // The pending answer was someone else's: a probe it took is theirs.
    return breaker.local.state(this.clock.nowMs()) === 'closed' ? 'pass' : 'skip';
  }

  private breakerOf(route: BreakerRoute): RouteBreaker {
    let breaker = this.breakers.get(route.key);
    if (breaker) return breaker;
    if (this.breakers.size >= ROUTES_MAX) this.evict();
    breaker = {
      route,
      redisKey: `engine-breaker:{${sha1(route.key).slice(0, 20)}}`,
      local: new LocalBreaker(this.policy),
      syncedAt: -Infinity,
      pending: null,
    };
    this.breakers.set(route.key, breaker);
    return breaker;
  }

  /** Drops breakers that hold nothing (closed, no failures), oldest first; else the oldest. */
  private evict(): void {
    const now = this.clock.nowMs();
    for (const [key, breaker] of this.breakers) {
      if (breaker.route.configured) continue;
      if (breaker.local.failures === 0 && breaker.local.state(now) === 'closed') {
        this.breakers.delete(key);
        if (this.breakers.size < ROUTES_MAX / 2) return;
      }
    }
    while (this.breakers.size >= ROUTES_MAX) {
      const oldest = [...this.breakers.entries()].find(([, b]) => !b.route.configured);
      if (!oldest) return;
      this.breakers.delete(oldest[0]);
    }
  }

  /** The client when commands can run now; ioredis without a connection fails them anyway. */
  private usableRedis(): NonNullable<RedisClient> | null {
    if (!this.redis) return null;
    if (this.redis.status !== 'ready') {
      this.failedRedis(new Error(`Redis connection is ${this.redis.status}`));
      return null;
    }
    return this.redis;
  }

  private async call(
    redis: NonNullable<RedisClient>,
    sha: string,
    script: string,
    key: string,
    args: string[],
  ): Promise<SharedView> {
    const evaluate = async () => {
      try {
        return await redis.evalsha(sha, 1, key, ...args);
      } catch (error) {
        if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
        return redis.eval(script, 1, key, ...args);
      }
    };
    const [state, failures, remainingMs] = (await this.withTimeout(evaluate())) as [
      SharedView['state'],
      number,
      number,
    ];
    if (this.degradedSince !== null) this.recovered();
    return { state, failures: Number(failures), remainingMs: Number(remainingMs) };
  }

  private async withTimeout<T>(work: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new BreakerTimeout()), BREAKER_REDIS_TIMEOUT_MS);
    });
    try {
      return await Promise.race([work, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private failedRedis(error: unknown): void {
    const now = this.clock.nowMs();
    this.degradedSince ??= now;
    if (now - this.lastWarnAt < WARN_INTERVAL_MS) return;
    this.lastWarnAt = now;
    this.logger.warn(
      { reason: error instanceof Error ? error.message : String(error) },
      'engine circuit breakers: Redis unavailable, each instance decides from its own copy',
    );
  }

  private recovered(): void {
    this.logger.info(
      { degradedSince: new Date(this.degradedSince ?? this.clock.nowMs()).toISOString() },
      'engine circuit breakers: Redis answers again, the breakers are shared',
    );
    this.degradedSince = null;
  }
}
