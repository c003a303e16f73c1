import { Module } from '@nestjs/common';
import { ThrottlerModule } from '@nestjs/throttler';
import type { Request } from 'express';
import type { ServerResponse } from 'node:http';
import { AuthModule } from '../auth/auth.module';
import { BEFORE_ERROR_REPLY, type BeforeErrorReply } from '../common/errors/before-error-reply';
import { type RateLimitConfig, rateLimitConfig } from '../config/rate-limit.config';
import { OrganizationsModule } from '../organizations/organizations.module';
import { SpendModule } from '../spend/spend.module';
import { ToolsModule } from '../tools/tools.module';
import { BucketResolver, bucketKey } from './bucket-resolver.service';
import { RateLimiter } from './rate-limiter.service';
import { TokenBucketStorage } from './token-bucket.storage';

/** The buckets alone, so ThrottlerModule's factory and /health/ready can reach them. */
@Module({ providers: [TokenBucketStorage], exports: [TokenBucketStorage] })
export class RateLimitStorageModule {}

/** Who draws from which bucket, for ThrottlerModule's factory and the error path. */
@Module({
  imports: [AuthModule, OrganizationsModule, SpendModule, ToolsModule],
  providers: [BucketResolver],
  exports: [BucketResolver],
})
export class RateLimitBucketsModule {}

/**
 * Requests no throttler charged (unknown routes answer 404 from Nest's fallback handler; bodies
 * the parser refuses answer 400/413/415 from its middleware; a bad credential is refused by the
 * authentication guard) still draw from the client IP's bucket (or the auth bucket on its paths)
 * and carry the headers: the exception filter awaits this before writing their error, and answers
 * 429 instead when the bucket is empty.
 */
function chargeUnguarded(
  rateLimit: RateLimitConfig,
  buckets: BucketResolver,
  storage: TokenBucketStorage,
  limiter: RateLimiter,
): BeforeErrorReply | null {
  if (!rateLimit.enabled) return null;
  return async (request, response: ServerResponse) => {
    if (RateLimiter.hasHeaders(response) || response.headersSent) return null;
    const { name, tracker, limit, ttl } = buckets.forUnrouted(request as Request);
    const record = await storage.increment(bucketKey(name, tracker), ttl, limit, ttl, name);
    limiter.report(response, name, limit, ttl, record);
    return record.isBlocked ? RateLimiter.rateLimited(record.timeToBlockExpire) : null;
  };
}

@Module({
  imports: [
    RateLimitBucketsModule,
    RateLimitStorageModule,
    ThrottlerModule.forRootAsync({
      imports: [RateLimitStorageModule, RateLimitBucketsModule],
      inject: [TokenBucketStorage, BucketResolver],
      useFactory: (storage: TokenBucketStorage, buckets: BucketResolver) => ({
        storage,
        throttlers: buckets.throttlers(),
        getTracker: (request) => BucketResolver.clientIp(request as Request),
        generateKey: (_context, tracker, name) => bucketKey(name, tracker),
        // RateLimitGuard writes the contract's headers (§5) instead of the framework's.
        setHeaders: false,
      }),
    }),
  ],
  providers: [
    RateLimiter,
    {
      provide: BEFORE_ERROR_REPLY,
      inject: [rateLimitConfig.KEY, BucketResolver, TokenBucketStorage, RateLimiter],
      useFactory: chargeUnguarded,
    },
  ],
  exports: [RateLimiter, RateLimitStorageModule, BEFORE_ERROR_REPLY],
})
export class RateLimitModule {}
