import { ExecutionContext, Inject, Injectable, OnModuleInit } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { Reflector } from '@nestjs/core';
import {
  InjectThrottlerOptions,
  InjectThrottlerStorage,
  ThrottlerGuard,
  type ThrottlerLimitDetail,
  type ThrottlerModuleOptions,
  type ThrottlerRequest,
} from '@nestjs/throttler';
import type { ServerResponse } from 'node:http';
import { rateLimitConfig } from '../config/rate-limit.config';
import { THROTTLER_NAMES, type ThrottlerName } from './bucket-resolver.service';
import { RateLimiter } from './rate-limiter.service';
import type { TokenBucketStorage } from './token-bucket.storage';

/** Set on a response once one of the caller's own buckets (end user, key, organization) reported. */
const CALLER_HEADERS = Symbol('rateLimitCallerHeaders');

/**
 * `@nestjs/throttler`'s guard, run its own way: its canActivate walks the named throttlers of
 * ThrottlerModule's options (auth, ip, end_user, key, org: BucketResolver.throttlers), each
 * skipped or sized per request through the framework's `skipIf`, `limit`, `ttl` and
 * `getTracker`, keys made by the options' `generateKey`, tokens taken by the storage's
 * `increment()` (TokenBucketStorage).
 *
 * One piece stays ours, handleRequest: the framework writes its own headers (`X-RateLimit-Limit-org`
 * = hits per window, `-Reset-org` in seconds), and the contract's are different (§5: the refill
 * rate, an ISO instant, the IETF `RateLimit`/`RateLimit-Policy` pair, unsuffixed). So the
 * options turn `setHeaders` off and this handleRequest does what the framework's does (tracker,
 * key, increment, throwThrottlingException when blocked) with RateLimiter writing the headers;
 * it also takes nothing when the org throttler has no organization to charge (a bad credential,
 * refused next by the authentication guard and charged to the address on the way out).
 *
 * Registered as the first APP_GUARD (app.module.ts), before authentication, so 401s and 403s
 * carry the headers and floods of bad credentials are throttled per address.
 */
@Injectable()
export class RateLimitGuard extends ThrottlerGuard implements OnModuleInit {
  private readonly enabled: boolean;

  constructor(
    @InjectThrottlerOptions() options: ThrottlerModuleOptions,
    @InjectThrottlerStorage() private readonly buckets: TokenBucketStorage,
    reflector: Reflector,
    @Inject(rateLimitConfig.KEY) rateLimit: ConfigType<typeof rateLimitConfig>,
    private readonly limiter: RateLimiter,
  ) {
    super(options, buckets, reflector);
    this.enabled = rateLimit.enabled;
  }

  override async onModuleInit(): Promise<void> {
    await super.onModuleInit();
    // The framework orders throttlers by ttl; ours must draw in their declared order, because the
    // IP bucket pays for an API-key lookup before the throttlers after it make it.
    const rank = (name?: string) => THROTTLER_NAMES.indexOf(name as ThrottlerName);
    this.throttlers.sort((a, b) => rank(a.name) - rank(b.name));
  }

  protected override shouldSkip(): Promise<boolean> {
    return Promise.resolve(!this.enabled);
  }

  protected override async handleRequest({
    context,
    limit,
    ttl,
    throttler,
    blockDuration,
    getTracker,
    generateKey,
  }: ThrottlerRequest): Promise<boolean> {
    const { req, res } = this.getRequestResponse(context);
    const tracker = await getTracker(req, context);
    if (tracker === '') return true;
    const name = throttler.name ?? 'default';
    const key = generateKey(context, tracker, name);
    const record = await this.buckets.increment(key, ttl, limit, blockDuration, name);
    // The headers describe the caller's bucket that binds soonest: the one that refuses, else
    // the one with the fewest tokens left, whichever order they draw in. The address's bucket,
    // drawn before an API key's lookup, only pays for the lookup: the caller's first bucket
    // replaces its headers (found by review: a key not cached showed "ip" and its size).
    const response = res as ServerResponse & { [CALLER_HEADERS]?: true };
    const callers = name !== 'auth' && name !== 'ip';
    this.limiter.report(response, name, limit, ttl, record, !callers || !!response[CALLER_HEADERS]);
    if (callers) response[CALLER_HEADERS] = true;
    if (record.isBlocked) {
      await this.throwThrottlingException(context, { ...record, limit, ttl, key, tracker });
    }
    return true;
  }

  /** The contract's 429 envelope, Retry-After at the moment one token is back. */
  protected override throwThrottlingException(
    _context: ExecutionContext,
    detail: ThrottlerLimitDetail,
  ): Promise<void> {
    throw RateLimiter.rateLimited(detail.timeToBlockExpire);
  }
}
