import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, IsUrl, Matches, Max, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

/** Stripe's meter event names: letters, digits, `_`, `-`, `.` and `:`, at most 100. */
const METER_EVENT_NAME = /^[A-Za-z0-9_.:-]{1,100}$/;
const METER_EVENT_NAME_MESSAGE = (name: string) =>
  `${name} must be a Stripe meter's event name: 1-100 characters of A-Z a-z 0-9 _ . : -`;

class BillingEnv {
  @IsOptional()
  @Matches(/^(sk|rk)_(test|live)_[A-Za-z0-9_]+$/, {
    message: 'STRIPE_SECRET_KEY must look like sk_test_… or sk_live_…',
  })
  STRIPE_SECRET_KEY?: string;

  @IsOptional()
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  STRIPE_API_BASE?: string;

  // Comma-separated, so a secret can be rotated without dropping events signed with the old one.
  @IsOptional()
  @IsString()
  STRIPE_WEBHOOK_SECRET?: string;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(100)
  @Max(80_000)
  STRIPE_TIMEOUT_MS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(0)
  @Max(5)
  STRIPE_MAX_NETWORK_RETRIES?: number;

  /**
   * The prices an organization may subscribe to, comma-separated; unset: any active price of the
   * Stripe account (an internal or free price included), which suits a test account only.
   */
  @IsOptional()
  @Matches(/^\s*price_[A-Za-z0-9]+\s*(,\s*price_[A-Za-z0-9]+\s*)*$/, {
    message: 'STRIPE_PRICE_IDS must be Stripe price ids (price_…), comma-separated',
  })
  STRIPE_PRICE_IDS?: string;

  /** A meter's event name: each relationship new in a month sends one meter event (§23). */
  @IsOptional()
  @Matches(METER_EVENT_NAME, { message: METER_EVENT_NAME_MESSAGE('STRIPE_METER_EVENT_NAME') })
  STRIPE_METER_EVENT_NAME?: string;

  /** A meter's event name: provider tokens are sent summed per organization and hour. */
  @IsOptional()
  @Matches(METER_EVENT_NAME, {
    message: METER_EVENT_NAME_MESSAGE('STRIPE_TOKEN_METER_EVENT_NAME'),
  })
  STRIPE_TOKEN_METER_EVENT_NAME?: string;

  /** How often each instance looks for meter events to send. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(10)
  @Max(600_000)
  STRIPE_METER_POLL_INTERVAL_MS?: number;

  /** The first wait before a failed meter event is sent again (doubling up to an hour). */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(10)
  @Max(3_600_000)
  STRIPE_METER_RETRY_BASE_MS?: number;
}

export const billingConfig = registerAs('billing', () => {
  const env = validateEnv(BillingEnv);
  const apiBase = env.STRIPE_API_BASE ? new URL(env.STRIPE_API_BASE) : undefined;
  return {
    stripeSecretKey: env.STRIPE_SECRET_KEY,
    stripeApi: apiBase
      ? {
          protocol: apiBase.protocol.replace(':', '') as 'http' | 'https',
          host: apiBase.hostname,
          port: Number(apiBase.port || (apiBase.protocol === 'https:' ? 443 : 80)),
        }
      : undefined,
    webhookSecrets: (env.STRIPE_WEBHOOK_SECRET ?? '')
      .split(',')
      .map((secret) => secret.trim())
      .filter((secret) => secret.length > 0),
    /** Empty: any active price. */
    priceIds: (env.STRIPE_PRICE_IDS ?? '')
      .split(',')
      .map((id) => id.trim())
      .filter((id) => id.length > 0),
    timeoutMs: env.STRIPE_TIMEOUT_MS ?? 5_000,
    maxNetworkRetries: env.STRIPE_MAX_NETWORK_RETRIES ?? 2,
    meterEventName: env.STRIPE_METER_EVENT_NAME,
    tokenMeterEventName: env.STRIPE_TOKEN_METER_EVENT_NAME,
    meterPollIntervalMs: env.STRIPE_METER_POLL_INTERVAL_MS ?? 1_000,
    meterRetryBaseMs: env.STRIPE_METER_RETRY_BASE_MS ?? 10_000,
  };
});

export type BillingConfig = ReturnType<typeof billingConfig>;
