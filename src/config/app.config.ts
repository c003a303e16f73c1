import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { randomBytes } from 'node:crypto';
import {
  IsBoolean,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  IsUrl,
  Max,
  Min,
  MinLength,
} from 'class-validator';
import { toBoolean, toNumber, validateEnv } from './validate-env';

export class AppEnv {
  @IsOptional()
  @IsIn(['development', 'production', 'test'])
  NODE_ENV?: string;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(0)
  @Max(65535)
  PORT?: number;

  @IsOptional()
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  APP_PUBLIC_URL?: string;

  @IsOptional()
  @Transform(toBoolean)
  @IsBoolean()
  TRUST_PROXY?: boolean;

  @IsOptional()
  @IsIn(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  LOG_LEVEL?: string;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  // 0 made every SIGTERM a forced exit at once, cutting every request in flight (review); past
  // Node's longest timer (2^31 - 1 ms) the timers fired at once and did the same (review).
  @Min(1000)
  @Max(3_600_000)
  SHUTDOWN_TIMEOUT_MS?: number;

  @IsOptional()
  @IsString()
  @MinLength(32)
  LOG_HASH_KEY?: string;
}

export const appConfig = registerAs('app', () => {
  const env = validateEnv(AppEnv);
  return {
    nodeEnv: env.NODE_ENV ?? 'development',
    port: env.PORT ?? 3000,
    publicUrl: (env.APP_PUBLIC_URL ?? 'http://localhost:3000').replace(/\/+$/, ''),
    trustProxy: env.TRUST_PROXY ?? false,
    logLevel: env.LOG_LEVEL ?? 'info',
    shutdownTimeoutMs: env.SHUTDOWN_TIMEOUT_MS ?? 10_000,
    /**
     * Keys the hashes of path parameters in request log lines; unset, a random key per process
     * (lines then correlate within one process only).
     */
    logHashKey: env.LOG_HASH_KEY ?? randomBytes(32).toString('base64'),
  };
});

export type AppConfig = ReturnType<typeof appConfig>;
