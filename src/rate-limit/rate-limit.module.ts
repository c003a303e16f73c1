import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { ThrottlerModule } from '@nestjs/throttler';
import type { Request } from 'express';
import type { ServerResponse } from 'node:http';
import { AuthModule } from '../auth/auth.module';
import { BEFORE_ERROR_REPLY, type BeforeErrorReply } from '../common/errors/before-error-reply';
import type { RateLimitConfig } from '../config/rate-limit.config';
import { OrganizationsModule } from '../organizations/organizations.module';
import { BucketResolver } from './bucket-resolver.service';
import { RateLimiter } from './rate-limiter.service';
import { TokenBucketStorage } from './token-bucket.storage';

/** The buckets alone, so ThrottlerModule's factory and /health/ready can reach them. */
@Module({ providers: [TokenBucketStorage], exports: [TokenBucketStorage] })
export class RateLimitStorageModule {}

/**
 * Requests that never reach a guard (unknown routes answer 404 from Nest's fallback handler;
 * bodies the parser refuses answer 400/413/415 from its middleware) still draw from the client
 * IP's bucket (or the auth bucket on its paths) and carry the headers: the exception filter awaits
 * this before writing their error, and answers 429 instead when the bucket is empty.
 */
function chargeUnguarded(
  config: ConfigService,
  buckets: BucketResolver,
  limiter: RateLimiter,
): BeforeErrorReply | null {
  if (!config.getOrThrow<RateLimitConfig>('rateLimit').enabled) return null;
  return async (request, response: ServerResponse) => {
    if (RateLimiter.hasHeaders(response) || response.headersSent) return null;
    const decision = await limiter.take(buckets.forUnrouted(request as Request), response);
    return decision.allowed
      ? null
      : RateLimiter.rateLimited(Math.ceil(decision.msUntilToken / 1000));
  };
}

@Module({
  imports: [
    AuthModule,
    OrganizationsModule,
    RateLimitStorageModule,
    ThrottlerModule.forRootAsync({
      imports: [RateLimitStorageModule],
      inject: [ConfigService, TokenBucketStorage],
      useFactory: (config: ConfigService, storage: TokenBucketStorage) => {
        const { org } = config.getOrThrow<RateLimitConfig>('rateLimit');
        return {
          storage,
          // One throttler, so @SkipThrottle() works; its limit/ttl describe the default org
          // bucket only: RateLimitGuard sizes each request's bucket itself (BucketResolver).
          throttlers: [{ name: 'default', limit: org.burst, ttl: (org.burst / org.rps) * 1000 }],
        };
      },
    }),
  ],
  providers: [
    BucketResolver,
    RateLimiter,
    {
      provide: BEFORE_ERROR_REPLY,
      inject: [ConfigService, BucketResolver, RateLimiter],
      useFactory: chargeUnguarded,
    },
  ],
  exports: [BucketResolver, RateLimiter, RateLimitStorageModule, BEFORE_ERROR_REPLY],
})
export class RateLimitModule {}
