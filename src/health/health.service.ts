import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { AppError } from '../common/errors/app-error';
import { ShutdownSignal } from '../common/lifecycle/shutdown-signal';
import { Database } from '../database/database';
import { TokenBucketStorage } from '../rate-limit/token-bucket.storage';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';

const CHECK_TIMEOUT_MS = 1_500;

type Check = { status: string; message?: string; [detail: string]: unknown };

export interface Readiness {
  status: 'ok' | 'degraded';
  checks: Record<string, Check>;
}

/**
 * Readiness fails on the database and once a shutdown has begun; Redis is reported (degraded when down or when rate
 * limits fell back to in-process buckets) without failing it (docs/decisions.md).
 */
@Injectable()
export class HealthService {
  constructor(
    private readonly database: Database,
    private readonly indicators: HealthIndicatorService,
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly rateLimits: TokenBucketStorage,
    private readonly shutdown: ShutdownSignal,
  ) {}

  async readiness(): Promise<Readiness> {
    if (this.shutdown.stopping) {
      throw new AppError('not_ready', 'The service is shutting down', {
        extra: { checks: { shutdown: { status: 'stopping' } } },
      });
    }
    const checks: Record<string, Check> = { database: await this.databaseCheck() };
    if (this.redis) {
      checks.redis = await this.redisCheck(this.redis);
      checks.rate_limit = this.rateLimitCheck();
    }
    const degraded = checks.redis?.status === 'down' || checks.rate_limit?.status === 'degraded';
    return { status: degraded ? 'degraded' : 'ok', checks };
  }

  /** Up when the pool answers a ping in time; otherwise readiness fails (503 `not_ready`). */
  private async databaseCheck(): Promise<Check> {
    const session = this.indicators.check('database');
    try {
      await withinCheckTimeout(this.database.ping());
      return session.up().database;
    } catch {
      throw new AppError('not_ready', 'The database is unreachable', {
        extra: { checks: { database: { status: 'down' } } },
      });
    }
  }

  /** Degraded while Redis errors or times out on rate-limit calls (a slow Redis still answers pings). */
  private rateLimitCheck(): Check {
    const { store, degraded, degradedSince } = this.rateLimits.status();
    if (!degraded) return { status: 'up', store };
    return {
      status: 'degraded',
      store,
      since: degradedSince,
      message: 'Redis unavailable or slow: limits are enforced per instance',
    };
  }

  private async redisCheck(redis: NonNullable<RedisClient>): Promise<Check> {
    const session = this.indicators.check('redis');
    try {
      await withinCheckTimeout(redis.ping());
      return session.up().redis;
    } catch {
      return { status: 'down', message: 'Redis unreachable: rate limits use in-process buckets' };
    }
  }
}

/** The check's own answer, or a rejection once CHECK_TIMEOUT_MS has passed. */
function withinCheckTimeout<T>(check: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS);
    timer.unref();
  });
  return Promise.race([check, timeout]).finally(() => clearTimeout(timer));
}
