import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { Reflector } from '@nestjs/core';
import {
  InjectThrottlerOptions,
  InjectThrottlerStorage,
  ThrottlerGuard,
  type ThrottlerModuleOptions,
  type ThrottlerRequest,
} from '@nestjs/throttler';
import type { Request } from 'express';
import type { ServerResponse } from 'node:http';
import type { RateLimitConfig } from '../config/rate-limit.config';
import { type Bucket, BucketResolver } from './bucket-resolver.service';
import { RateLimiter } from './rate-limiter.service';
import type { TokenBucketStorage } from './token-bucket.storage';

/**
 * The throttler framework's guard with token-bucket semantics. The framework's own model (at most
 * `limit` hits per `ttl`, one counter per route) cannot express "refill r tokens per second into
 * one bucket per organization", so handleRequest picks the bucket (BucketResolver), takes a token
 * from TokenBucketStorage and writes the headers; @SkipThrottle() and the storage wiring stay the
 * framework's. Registered as the first APP_GUARD (app.module.ts), before authentication, so 401s
 * and 403s carry the headers and floods of bad credentials are throttled per address.
 */
@Injectable()
export class RateLimitGuard extends ThrottlerGuard {
  private readonly enabled: boolean;

  constructor(
    @InjectThrottlerOptions() options: ThrottlerModuleOptions,
    @InjectThrottlerStorage() storage: TokenBucketStorage,
    reflector: Reflector,
    config: ConfigService,
    private readonly buckets: BucketResolver,
    private readonly limiter: RateLimiter,
  ) {
    super(options, storage, reflector);
    this.enabled = config.getOrThrow<RateLimitConfig>('rateLimit').enabled;
  }

  protected override async shouldSkip(): Promise<boolean> {
    return !this.enabled;
  }

  protected override async getTracker(request: Record<string, unknown>): Promise<string> {
    return BucketResolver.clientIp(request as unknown as Request);
  }

  protected override async handleRequest({
    context,
    getTracker,
  }: ThrottlerRequest): Promise<boolean> {
    const { req, res } = this.getRequestResponse(context);
    const tracker = await getTracker(req, context);
    const lookupBucket = this.buckets.lookupBucket(context, tracker);
    if (lookupBucket) await this.take(lookupBucket, res as ServerResponse);
    const bucket = await this.buckets.forRoute(context, tracker);
    if (bucket.key !== lookupBucket?.key) await this.take(bucket, res as ServerResponse);
    return true;
  }

  private async take(bucket: Bucket, response: ServerResponse): Promise<void> {
    const decision = await this.limiter.take(bucket, response);
    if (!decision.allowed) {
      throw RateLimiter.rateLimited(Math.ceil(decision.msUntilToken / 1000));
    }
  }
}
