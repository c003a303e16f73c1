import { Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { AppError } from '../common/errors/app-error';
import type { Bucket } from './bucket-resolver.service';
import { type BucketDecision, rateLimitHeaders } from './token-bucket';
import { TokenBucketStorage } from './token-bucket.storage';

/** Takes a token for a request and writes the rate-limit headers on its response. */
@Injectable()
export class RateLimiter {
  constructor(private readonly storage: TokenBucketStorage) {}

  /** The 429 envelope; Retry-After points at the moment one token is back (whole seconds, ≥ 1). */
  static rateLimited(retryAfterSeconds: number): AppError {
    const seconds = Math.max(1, retryAfterSeconds);
    return new AppError(
      'rate_limited',
      429,
      `Too many requests: retry in ${seconds} s`,
      undefined,
      { 'Retry-After': String(seconds) },
    );
  }

  /** True once this request's rate-limit headers are set (the guard saw it). */
  static hasHeaders(response: ServerResponse): boolean {
    return response.hasHeader('X-RateLimit-Limit');
  }

  async take(bucket: Bucket, response: ServerResponse): Promise<BucketDecision> {
    const decision = await this.storage.take(bucket.key, bucket.policy);
    if (!response.headersSent) {
      const headers = rateLimitHeaders(decision, bucket.policy, Date.now());
      for (const [name, value] of Object.entries(headers)) response.setHeader(name, value);
    }
    return decision;
  }
}
