import { Inject, Injectable } from '@nestjs/common';
import {
  HealthCheckService,
  HealthIndicatorService,
  TypeOrmHealthIndicator,
} from '@nestjs/terminus';
import { AppError } from '../common/errors/app-error';
import { TokenBucketStorage } from '../rate-limit/token-bucket.storage';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';

const CHECK_TIMEOUT_MS = 1_500;

type Check = { status: string; message?: string; [detail: string]: unknown };

export interface Readiness {
  status: 'ok' | 'degraded';
  checks: Record<string, Check>;
}

/**
 * Readiness fails only on the database; Redis is reported (degraded when down or when rate
 * limits fell back to in-process buckets) without failing it (docs/decisions.md).
 */
@Injectable()
export class HealthService {
  constructor(
    private readonly health: HealthCheckService,
    private readonly database: TypeOrmHealthIndicator,
    private readonly indicators: HealthIndicatorService,
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly rateLimits: TokenBucketStorage,
  ) {}

  async readiness(): Promise<Readiness> {
    const checks: Record<string, Check> = {};
    try {
      const result = await this.health.check([
        () => this.database.pingCheck('database', { timeout: CHECK_TIMEOUT_MS }),
      ]);
      Object.assign(checks, result.details);
    } catch {
      throw new AppError('not_ready', 'The database is unreachable', {
        extra: { checks: { database: { status: 'down' } } },
      });
    }
    if (this.redis) {
      checks.redis = await this.redisCheck(this.redis);
      checks.rate_limit = this.rateLimitCheck();
    }
    const degraded = checks.redis?.status === 'down' || checks.rate_limit?.status === 'degraded';
    return { status: degraded ? 'degraded' : 'ok', checks };
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
      await Promise.race([
        redis.ping(),
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS).unref(),
        ),
      ]);
      return session.up().redis;
    } catch {
      return { status: 'down', message: 'Redis unreachable: rate limits use in-process buckets' };
    }
  }
}
