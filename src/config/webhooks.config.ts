import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsBoolean, IsInt, IsOptional, Matches, Max, Min } from 'class-validator';
import { toBoolean, toNumber, validateEnv } from './validate-env';

const PORT_LIST = /^\s*\d{1,5}(\s*-\s*\d{1,5})?(\s*,\s*\d{1,5}(\s*-\s*\d{1,5})?)*\s*$/;

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

  /** Attempts one organization has in flight on one instance at most (fairness between tenants). */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(1_000)
  WEBHOOK_CONCURRENCY_PER_ORG?: number;

  /** An endpoint whose attempts have all failed for this many hours is disabled. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(24 * 365)
  WEBHOOK_DISABLE_AFTER_HOURS?: number;

  /** The ports a webhook URL may name: ports and ranges, comma-separated (`443,9000-9100`). */
  @IsOptional()
  @Matches(PORT_LIST, {
    message: 'WEBHOOK_ALLOWED_PORTS must be ports and ranges, comma-separated (e.g. 443,9000-9100)',
  })
  WEBHOOK_ALLOWED_PORTS?: string;
}

/** An inclusive range of TCP ports. */
export type PortRange = readonly [number, number];

/** The ports of a URL when WEBHOOK_ALLOWED_PORTS is unset: the web's usual four. */
export const DEFAULT_WEBHOOK_PORTS = '80,443,8080,8443';

/**
 * `443, 9000-9100` → [[443, 443], [9000, 9100]]. Throws, naming the variable, for a port outside
 * 1..65535 or a range whose end comes before its start.
 */
export function parsePortRanges(text: string): PortRange[] {
  return text.split(',').map((item) => {
    const [first, last = first] = item.split('-').map((part) => Number(part.trim()));
    if (!(first >= 1 && last <= 65_535 && first <= last)) {
      throw new Error(
        `Invalid configuration:\n  WEBHOOK_ALLOWED_PORTS: "${item.trim()}" is not a port (1..65535) or a range of them`,
      );
    }
    return [first, last] as const;
  });
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
    concurrencyPerOrganization: env.WEBHOOK_CONCURRENCY_PER_ORG ?? 8,
    disableAfterHours: env.WEBHOOK_DISABLE_AFTER_HOURS ?? 72,
    allowedPorts: parsePortRanges(env.WEBHOOK_ALLOWED_PORTS ?? DEFAULT_WEBHOOK_PORTS),
  };
});

export type WebhooksConfig = ReturnType<typeof webhooksConfig>;
