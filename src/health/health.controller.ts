import { Controller, Get, Inject } from '@nestjs/common';
import {
  ApiOkResponse,
  ApiOperation,
  ApiServiceUnavailableResponse,
  ApiTags,
} from '@nestjs/swagger';
import {
  HealthCheck,
  HealthCheckService,
  HealthIndicatorService,
  TypeOrmHealthIndicator,
} from '@nestjs/terminus';
import { Public } from '../common/auth/auth.decorators';
import { AppError } from '../common/errors/app-error';
import { ErrorEnvelopeDto } from '../common/errors/error-envelope';
import { TokenBucketStorage } from '../rate-limit/token-bucket.storage';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';

const CHECK_TIMEOUT_MS = 1_500;

@ApiTags('health')
@Public()
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly database: TypeOrmHealthIndicator,
    private readonly indicators: HealthIndicatorService,
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly rateLimits: TokenBucketStorage,
  ) {}

  @Get('live')
  @ApiOperation({ summary: 'Liveness: the process answers' })
  @ApiOkResponse({ schema: { example: { status: 'ok' } } })
  live() {
    return { status: 'ok' };
  }

  @Get('ready')
  @HealthCheck({ swaggerDocumentation: false })
  @ApiOperation({
    summary: 'Readiness: the database answers',
    description:
      'Redis (when REDIS_URL is set) is reported but does not fail readiness: rate limits fall back to in-process buckets while it is away or slow, and `rate_limit` says `degraded` (overall status `degraded`, still 200).',
  })
  @ApiOkResponse({ schema: { example: { status: 'ok', checks: { database: { status: 'up' } } } } })
  @ApiServiceUnavailableResponse({
    description: 'The database is unreachable (`not_ready`)',
    type: ErrorEnvelopeDto,
  })
  async ready() {
    const checks: Record<string, { status: string; message?: string; [detail: string]: unknown }> =
      {};
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
  private rateLimitCheck() {
    const { store, degraded, degradedSince } = this.rateLimits.status();
    if (!degraded) return { status: 'up', store };
    return {
      status: 'degraded',
      store,
      since: degradedSince,
      message: 'Redis unavailable or slow: limits are enforced per instance',
    };
  }

  private async redisCheck(redis: NonNullable<RedisClient>) {
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
