import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import type { ThrottlerStorage } from '@nestjs/throttler';
import { PinoLogger } from 'nestjs-pino';
import { createHash } from 'node:crypto';
import { Clock } from '../common/time/clock';
import { rateLimitConfig } from '../config/rate-limit.config';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';
import { MemoryBuckets } from './memory-buckets';
import {
  BUCKET_KEPT_MS,
  type BucketDecision,
  type BucketPolicy,
  decide,
  type TokenBucketRecord,
  toThrottlerRecord,
} from './token-bucket';

type Size = Pick<BucketPolicy, 'rps' | 'burst'>;

/**
 * takeToken() of token-bucket.ts as one atomic script: read, refill, take, write with a TTL.
 * It runs on Redis's clock, so instances whose clocks disagree still share one bucket exactly.
 * The key expires when the bucket would be full (a missing key is a full bucket), or after
 * ARGV[3] ms (BUCKET_KEPT_MS) unused, whichever comes first.
 * Tokens travel as strings: Redis truncates Lua numbers in replies to integers.
 */
export const TAKE_TOKEN_SCRIPT = `
local perMs = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'updated_at')
local tokens = burst
local updatedAt = now
if saved[1] and saved[2] then
  local previous = tonumber(saved[2])
  tokens = math.min(burst, tonumber(saved[1]) + math.max(0, now - previous) * perMs)
  updatedAt = math.max(now, previous)
end
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
local msUntilFull = math.ceil((burst - tokens) / perMs)
-- BUCKET_KEPT_MS, as decide() caps it: unused that long, the bucket is full (the key is gone).
local keptMs = tonumber(ARGV[3])
if not (msUntilFull < keptMs) then msUntilFull = keptMs end
local encoded = string.format('%.17g', tokens)
redis.call('HSET', KEYS[1], 'tokens', encoded, 'updated_at', string.format('%d', updatedAt))
redis.call('PEXPIRE', KEYS[1], math.max(1, msUntilFull))
return { allowed, encoded }
`;

const SCRIPT_SHA = createHash('sha1').update(TAKE_TOKEN_SCRIPT).digest('hex');
const WARN_INTERVAL_MS = 60_000;

export interface RateLimitStoreStatus {
  store: 'redis' | 'memory';
  /** True while Redis is configured but the last attempt to use it failed or timed out. */
  degraded: boolean;
  degradedSince?: string;
}

class RedisTimeout extends Error {
  constructor(ms: number) {
    super(`Redis did not answer within ${ms} ms`);
  }
}

/**
 * The token buckets, in Redis when REDIS_URL is set (shared by every instance), else in memory:
 * the throttler framework's storage. Its `increment()` takes one token from the bucket `key`,
 * sized as the framework sizes a throttler (`limit` per `ttl` ms: a burst of `limit` refilled in
 * `ttl`), and answers the framework's record plus the exact timings the contract's headers need.
 *
 * Fail-open: when Redis errors or answers slower than RATE_LIMIT_REDIS_TIMEOUT_MS, the request
 * draws from this instance's in-memory bucket instead. Requests keep being served at the price of
 * per-instance (looser) limits until Redis is back; it is logged at most once a minute and shown
 * as degraded by /health/ready.
 */
@Injectable()
export class TokenBucketStorage implements ThrottlerStorage {
  private readonly local: MemoryBuckets;
  private readonly timeoutMs: number;
  private readonly prefix: string;
  private degradedSince: number | null = null;
  private lastWarnAt = -Infinity;
  private failuresSinceWarn = 0;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly logger: PinoLogger,
    private readonly clock: Clock,
    @Inject(rateLimitConfig.KEY) rateLimit: ConfigType<typeof rateLimitConfig>,
  ) {
    this.logger.setContext(TokenBucketStorage.name);
    const { redisTimeoutMs, redisPrefix } = rateLimit;
    this.timeoutMs = redisTimeoutMs;
    this.prefix = redisPrefix;
    // The injected clock: one more call per take, nothing next to the Map work, and a spec can
    // move it. (Redis refills on its own clock, TIME in the script.)
    this.local = new MemoryBuckets(() => clock.nowMs());
  }

  /**
   * Takes a token from bucket `key` (no throttler prefix is added: the key is the bucket's name,
   * `org:<id>`, `ip:<address>`, `auth:<address>`). A token bucket has no separate block: a
   * refused request waits for one token, so `blockDuration` plays no part.
   */
  async increment(
    key: string,
    ttl: number,
    limit: number,
    _blockDuration: number,
    _throttlerName: string,
  ): Promise<TokenBucketRecord> {
    const size: Size = { burst: limit, rps: (limit * 1000) / ttl };
    return toThrottlerRecord(await this.take(key, size), limit);
  }

  private async take(key: string, size: Size): Promise<BucketDecision> {
    if (!this.redis) return this.local.take(key, size);
    try {
      const decision = await this.takeFromRedis(this.redis, key, size);
      if (this.degradedSince !== null) this.recovered();
      return decision;
    } catch (error) {
      this.failed(error);
      return this.local.take(key, size);
    }
  }

  status(): RateLimitStoreStatus {
    if (!this.redis) return { store: 'memory', degraded: false };
    if (this.degradedSince === null) return { store: 'redis', degraded: false };
    return {
      store: 'memory',
      degraded: true,
      degradedSince: new Date(this.degradedSince).toISOString(),
    };
  }

  private async takeFromRedis(
    redis: NonNullable<RedisClient>,
    key: string,
    size: Size,
  ): Promise<BucketDecision> {
    // Without a connection ioredis would fail the command anyway (no offline queue): skip the try.
    if (redis.status !== 'ready') throw new Error(`Redis connection is ${redis.status}`);
    const args = [
      this.prefix + key,
      String(size.rps / 1000),
      String(size.burst),
      String(BUCKET_KEPT_MS),
    ];
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new RedisTimeout(this.timeoutMs)), this.timeoutMs);
    });
    try {
      const reply = (await Promise.race([this.evaluate(redis, args), timeout])) as [number, string];
      return decide(reply[0] === 1, Number(reply[1]), size);
    } finally {
      clearTimeout(timer);
    }
  }

  /** EVALSHA, loading the script on the first NOSCRIPT (a fresh or restarted Redis). */
  private async evaluate(redis: NonNullable<RedisClient>, args: string[]): Promise<unknown> {
    try {
      return await redis.evalsha(SCRIPT_SHA, 1, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return redis.eval(TAKE_TOKEN_SCRIPT, 1, ...args);
    }
  }

  private failed(error: unknown): void {
    const now = this.clock.nowMs();
    this.degradedSince ??= now;
    this.failuresSinceWarn++;
    if (now - this.lastWarnAt < WARN_INTERVAL_MS) return;
    this.logger.warn(
      {
        reason: error instanceof Error ? error.message : String(error),
        failures: this.failuresSinceWarn,
      },
      'rate limiter: Redis unavailable, using per-instance in-memory buckets',
    );
    this.lastWarnAt = now;
    this.failuresSinceWarn = 0;
  }

  private recovered(): void {
    this.logger.info(
      { degradedSince: new Date(this.degradedSince ?? this.clock.nowMs()).toISOString() },
      'rate limiter: Redis answers again, buckets are shared',
    );
    this.degradedSince = null;
  }
}
