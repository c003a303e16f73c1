import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsBoolean, IsNumber, IsOptional, Matches, Max, Min } from 'class-validator';
import { toBoolean, toNumber, validateEnv } from './validate-env';

class RateLimitEnv {
  /** false turns the limiter off (benchmarks measure its cost against this); default on. */
  @IsOptional()
  @Transform(toBoolean)
  @IsBoolean()
  RATE_LIMIT_ENABLED?: boolean;

  /** Namespace of the bucket keys in Redis, so deployments (or test runs) sharing one Redis stay apart. */
  @IsOptional()
  @Matches(/^[A-Za-z0-9:_.-]{1,64}$/, {
    message: 'RATE_LIMIT_REDIS_PREFIX must be 1-64 characters of A-Z a-z 0-9 : _ . -',
  })
  RATE_LIMIT_REDIS_PREFIX?: string;

  @IsOptional()
  @Transform(toNumber)
  @IsNumber()
  @Min(0.01)
  @Max(1_000_000)
  RATE_LIMIT_ORG_RPS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsNumber()
  @Min(1)
  @Max(10_000_000)
  RATE_LIMIT_ORG_BURST?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsNumber()
  @Min(0.01)
  @Max(1_000_000)
  RATE_LIMIT_IP_RPS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsNumber()
  @Min(1)
  @Max(10_000_000)
  RATE_LIMIT_IP_BURST?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsNumber()
  @Min(0.001)
  @Max(1_000_000)
  RATE_LIMIT_AUTH_RPS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsNumber()
  @Min(1)
  @Max(10_000_000)
  RATE_LIMIT_AUTH_BURST?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsNumber()
  @Min(1)
  @Max(10_000)
  RATE_LIMIT_REDIS_TIMEOUT_MS?: number;
}

/** Bucket sizes: a refill rate in tokens per second and a capacity (the burst). */
export const rateLimitConfig = registerAs('rateLimit', () => {
  const env = validateEnv(RateLimitEnv);
  return {
    enabled: env.RATE_LIMIT_ENABLED ?? true,
    org: { rps: env.RATE_LIMIT_ORG_RPS ?? 50, burst: env.RATE_LIMIT_ORG_BURST ?? 100 },
    ip: { rps: env.RATE_LIMIT_IP_RPS ?? 20, burst: env.RATE_LIMIT_IP_BURST ?? 40 },
    auth: { rps: env.RATE_LIMIT_AUTH_RPS ?? 0.2, burst: env.RATE_LIMIT_AUTH_BURST ?? 10 },
    redisTimeoutMs: env.RATE_LIMIT_REDIS_TIMEOUT_MS ?? 50,
    redisPrefix: env.RATE_LIMIT_REDIS_PREFIX ?? 'rate-limit:',
  };
});

export type RateLimitConfig = ReturnType<typeof rateLimitConfig>;
