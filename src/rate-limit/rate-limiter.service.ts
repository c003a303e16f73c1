import { Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Counter } from 'prom-client';
import { AppError } from '../common/errors/app-error';
import { MetricsService } from '../metrics/metrics.service';
import type { Bucket } from './bucket-resolver.service';
import { type BucketDecision, rateLimitHeaders } from './token-bucket';
import { TokenBucketStorage } from './token-bucket.storage';

/** Takes a token for a request and writes the rate-limit headers on its response. */
@Injectable()
export class RateLimiter {
  /** `rate_limit_decisions_total` children by `${policy}:${allowed}`: a handful, made once each. */
  private readonly decisions = new Map<string, { inc(): void }>();
  private readonly decisionsTotal: Counter<'bucket' | 'outcome'>;

  constructor(
    private readonly storage: TokenBucketStorage,
    metrics: MetricsService,
  ) {
    this.decisionsTotal = metrics.counter({
      name: 'rate_limit_decisions_total',
      help: 'Rate-limit decisions by bucket (org, ip, auth) and outcome (allowed, limited)',
      labelNames: ['bucket', 'outcome'],
    });
  }

  /** The 429 envelope; Retry-After points at the moment one token is back (whole seconds, ≥ 1). */
  static rateLimited(retryAfterSeconds: number): AppError {
    const seconds = Math.max(1, retryAfterSeconds);
    return new AppError('rate_limited', `Too many requests: retry in ${seconds} s`, {
      headers: { 'Retry-After': String(seconds) },
    });
  }

  /** True once this request's rate-limit headers are set (the guard saw it). */
  static hasHeaders(response: ServerResponse): boolean {
    return response.hasHeader('X-RateLimit-Limit');
  }

  async take(bucket: Bucket, response: ServerResponse): Promise<BucketDecision> {
    const decision = await this.storage.take(bucket.key, bucket.policy);
    this.countDecision(bucket.policy.name, decision.allowed);
    if (!response.headersSent) {
      const headers = rateLimitHeaders(decision, bucket.policy, Date.now());
      for (const [name, value] of Object.entries(headers)) response.setHeader(name, value);
    }
    return decision;
  }

  private countDecision(bucket: string, allowed: boolean): void {
    const key = `${bucket}:${allowed}`;
    let counter = this.decisions.get(key);
    if (!counter) {
      counter = this.decisionsTotal.labels(bucket, allowed ? 'allowed' : 'limited');
      this.decisions.set(key, counter);
    }
    counter.inc();
  }
}
