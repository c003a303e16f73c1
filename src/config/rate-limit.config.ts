import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsNumber, IsOptional, Max, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

class RateLimitEnv {
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
    org: { rps: env.RATE_LIMIT_ORG_RPS ?? 50, burst: env.RATE_LIMIT_ORG_BURST ?? 100 },
    ip: { rps: env.RATE_LIMIT_IP_RPS ?? 20, burst: env.RATE_LIMIT_IP_BURST ?? 40 },
    auth: { rps: env.RATE_LIMIT_AUTH_RPS ?? 0.2, burst: env.RATE_LIMIT_AUTH_BURST ?? 10 },
    redisTimeoutMs: env.RATE_LIMIT_REDIS_TIMEOUT_MS ?? 50,
  };
});

export type RateLimitConfig = ReturnType<typeof rateLimitConfig>;
