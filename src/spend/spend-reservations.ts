import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { createHash } from 'node:crypto';
import { Clock } from '../common/time/clock';
import { rateLimitConfig } from '../config/rate-limit.config';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';

/** One budget a reservation is checked against and counted in. */
export interface ReservationScope {
  /** The budget's key (its organization, its period): `{org}:month:2026-11`. */
  key: string;
  limit: number;
  /** Tokens already spent in the period, as the database has them. */
  used: number;
}

export type ReservationOutcome =
  | { admitted: true; store: 'redis' | 'memory' }
  /** `scope`: the index of the budget that refused; `counted`: its spent + reserved tokens. */
  | { admitted: false; scope: number; counted: number };

/**
 * Checks every scope (`used` + the tokens its replies in flight reserved < limit) and, when all
 * have room, reserves `amount` in each, atomically. Reservations are members `<id>:<amount>` of a
 * sorted set per scope scored by their expiry (Redis's clock), so one whose instance crashed
 * before releasing it lapses by itself; the set expires with its last member.
 */
export const RESERVE_SCRIPT = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local reserved = 0
  for _, member in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    reserved = reserved + tonumber(string.match(member, ':(%d+)$'))
  end
  local counted = tonumber(ARGV[2 + 2 * i]) + reserved
  if counted >= tonumber(ARGV[1 + 2 * i]) then
    return { i, string.format('%d', counted) }
  end
end
local expires = now + tonumber(ARGV[2])
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, expires, ARGV[1])
  redis.call('PEXPIREAT', key, expires)
end
return { 0, '0' }
`;

interface Reserved {
  amount: number;
  expiresAt: number;
}

const SCRIPT_SHA = createHash('sha1').update(RESERVE_SCRIPT).digest('hex');
const WARN_INTERVAL_MS = 60_000;

class RedisTimeout extends Error {
  constructor(ms: number) {
    super(`Redis did not answer within ${ms} ms`);
  }
}

/**
 * The tokens reserved by replies in flight, per budget: in Redis when REDIS_URL is set (shared by
 * every instance, one atomic script per reservation), else in this process. Like the rate
 * limiter, it fails open onto this instance's memory when Redis errors or is slower than
 * RATE_LIMIT_REDIS_TIMEOUT_MS: replies go on, each instance then only sees its own reservations
 * (docs/spend-control.md, "Without Redis").
 */
@Injectable()
export class SpendReservations {
  private readonly local = new Map<string, Map<string, Reserved>>();
  private readonly timeoutMs: number;
  private readonly prefix: string;
  private lastWarnAt = -Infinity;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    @Inject(rateLimitConfig.KEY) rateLimit: ConfigType<typeof rateLimitConfig>,
  ) {
    this.logger.setContext(SpendReservations.name);
    const { redisTimeoutMs, redisPrefix } = rateLimit;
    this.timeoutMs = redisTimeoutMs;
    this.prefix = `${redisPrefix}spend:`;
  }

  async reserve(
    id: string,
    amount: number,
    ttlMs: number,
    scopes: ReservationScope[],
  ): Promise<ReservationOutcome> {
    const member = `${id}:${Math.max(0, Math.ceil(amount))}`;
    if (this.redis) {
      try {
        const [refused, counted] = await this.inRedis(this.redis, member, ttlMs, scopes);
        if (refused === 0) return { admitted: true, store: 'redis' };
        return { admitted: false, scope: refused - 1, counted: Number(counted) };
      } catch (error) {
        this.warn(error);
      }
    }
    return this.inMemory(member, ttlMs, scopes);
  }

  /** Gives the reservation back (the reply's tokens are in the database by now, or none were). */
  async release(
    id: string,
    amount: number,
    store: 'redis' | 'memory',
    keys: string[],
  ): Promise<void> {
    const member = `${id}:${Math.max(0, Math.ceil(amount))}`;
    if (store === 'memory' || !this.redis) {
      for (const key of keys) {
        const held = this.local.get(key);
        held?.delete(member);
        if (held?.size === 0) this.local.delete(key);
      }
      return;
    }
    if (this.redis.status !== 'ready') return; // it lapses at its expiry
    const pipeline = this.redis.pipeline();
    for (const key of keys) pipeline.zrem(this.prefix + key, member);
    await pipeline.exec();
  }

  private async inRedis(
    redis: NonNullable<RedisClient>,
    member: string,
    ttlMs: number,
    scopes: ReservationScope[],
  ): Promise<[number, string]> {
    if (redis.status !== 'ready') throw new Error(`Redis connection is ${redis.status}`);
    const keys = scopes.map((scope) => this.prefix + scope.key);
    const args = [
      member,
      String(ttlMs),
      ...scopes.flatMap((scope) => [String(scope.limit), String(scope.used)]),
    ];
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new RedisTimeout(this.timeoutMs)), this.timeoutMs);
    });
    try {
      return (await Promise.race([this.evaluate(redis, keys, args), timeout])) as [number, string];
    } finally {
      clearTimeout(timer);
    }
  }

  private async evaluate(
    redis: NonNullable<RedisClient>,
    keys: string[],
    args: string[],
  ): Promise<unknown> {
    try {
      return await redis.evalsha(SCRIPT_SHA, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return redis.eval(RESERVE_SCRIPT, keys.length, ...keys, ...args);
    }
  }

  /** The script's rule on this process's own reservations. */
  private inMemory(member: string, ttlMs: number, scopes: ReservationScope[]): ReservationOutcome {
    const now = this.clock.nowMs();
    for (const [index, scope] of scopes.entries()) {
      const held = this.local.get(scope.key);
      let reserved = 0;
      for (const [name, entry] of held ?? []) {
        if (entry.expiresAt <= now) held!.delete(name);
        else reserved += entry.amount;
      }
      if (held?.size === 0) this.local.delete(scope.key);
      const counted = scope.used + reserved;
      if (counted >= scope.limit) return { admitted: false, scope: index, counted };
    }
    const amount = Number(member.slice(member.lastIndexOf(':') + 1));
    for (const scope of scopes) {
      const held = this.local.get(scope.key) ?? new Map<string, Reserved>();
      held.set(member, { amount, expiresAt: now + ttlMs });
      this.local.set(scope.key, held);
    }
    return { admitted: true, store: 'memory' };
  }

  private warn(error: unknown): void {
    const now = this.clock.nowMs();
    if (now - this.lastWarnAt < WARN_INTERVAL_MS) return;
    this.lastWarnAt = now;
    this.logger.warn(
      { reason: error instanceof Error ? error.message : String(error) },
      'spend reservations: Redis unavailable, reserving in this instance only',
    );
  }
}
