import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsBoolean, IsInt, IsOptional, Max, Min } from 'class-validator';
import { toBoolean, toNumber, validateEnv } from './validate-env';

class WebhooksEnv {
  /** A delivery attempt that has no 2xx status within this fails (and is retried). */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(100)
  @Max(120_000)
  WEBHOOK_TIMEOUT_MS?: number;

  /** Wait before the second attempt; each later one waits twice as long as the one before. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(10)
  @Max(86_400_000)
  WEBHOOK_RETRY_BASE_MS?: number;

  /** Attempts per event and endpoint, the first included. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(30)
  WEBHOOK_MAX_ATTEMPTS?: number;

  /** true lets endpoints point at loopback, private and link-local addresses (tests, on-premises). */
  @IsOptional()
  @Transform(toBoolean)
  @IsBoolean()
  WEBHOOK_ALLOW_PRIVATE_URLS?: boolean;

  /** How often an idle instance looks for due deliveries. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(10)
  @Max(60_000)
  WEBHOOK_POLL_INTERVAL_MS?: number;

  /** Deliveries one instance has in flight at most (HTTP requests, never database connections). */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(1_000)
  WEBHOOK_CONCURRENCY?: number;
}

export const webhooksConfig = registerAs('webhooks', () => {
  const env = validateEnv(WebhooksEnv);
  return {
    timeoutMs: env.WEBHOOK_TIMEOUT_MS ?? 10_000,
    retryBaseMs: env.WEBHOOK_RETRY_BASE_MS ?? 5_000,
    maxAttempts: env.WEBHOOK_MAX_ATTEMPTS ?? 8,
    allowPrivateUrls: env.WEBHOOK_ALLOW_PRIVATE_URLS ?? false,
    pollIntervalMs: env.WEBHOOK_POLL_INTERVAL_MS ?? 500,
    concurrency: env.WEBHOOK_CONCURRENCY ?? 64,
  };
});

export type WebhooksConfig = ReturnType<typeof webhooksConfig>;
