import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, IsUrl, Matches, Max, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

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
    timeoutMs: env.STRIPE_TIMEOUT_MS ?? 5_000,
    maxNetworkRetries: env.STRIPE_MAX_NETWORK_RETRIES ?? 2,
  };
});

export type BillingConfig = ReturnType<typeof billingConfig>;
