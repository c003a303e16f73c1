import { Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { Counter } from 'prom-client';
import { AppError } from '../common/errors/app-error';
import { Clock } from '../common/time/clock';
import { MetricsService } from '../metrics/metrics.service';
import { type BucketDecision, type BucketPolicy, policyOf, rateLimitHeaders } from './token-bucket';

/** Writes the rate-limit headers of a decision on its response, and counts the decision. */
@Injectable()
export class RateLimiter {
  /** `rate_limit_decisions_total` children by `${policy}:${allowed}`: a handful, made once each. */
  private readonly decisions = new Map<string, { inc(): void }>();
  private readonly decisionsTotal: Counter<'bucket' | 'outcome'>;
  /** The last policy made per bucket name: the same few sizes come back on every request. */
  private readonly policies = new Map<
    string,
    { limit: number; ttl: number; policy: BucketPolicy }
  >();

  constructor(
    metrics: MetricsService,
    private readonly clock: Clock,
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

  /** True once this request's rate-limit headers are set (a throttler charged it). */
  static hasHeaders(response: ServerResponse): boolean {
    return response.hasHeader('X-RateLimit-Limit');
  }

  /** For the bucket named `name`, sized `limit` per `ttl` ms as the throttler sizes it. */
  report(
    response: ServerResponse,
    name: string,
    limit: number,
    ttl: number,
    decision: BucketDecision,
    onlyIfTighter = false,
  ): void {
    this.countDecision(name, decision.allowed);
    if (response.headersSent) return;
    if (onlyIfTighter && decision.allowed && response.hasHeader('X-RateLimit-Remaining')) {
      const shown = Number(response.getHeader('X-RateLimit-Remaining'));
      if (Math.floor(decision.tokens) >= shown) return;
    }
    const headers = rateLimitHeaders(decision, this.policy(name, limit, ttl), this.clock.nowMs());
    for (const header in headers) response.setHeader(header, headers[header]);
  }

  private policy(name: string, limit: number, ttl: number): BucketPolicy {
    const last = this.policies.get(name);
    if (last && last.limit === limit && last.ttl === ttl) return last.policy;
    const policy = policyOf(name, limit, ttl);
    this.policies.set(name, { limit, ttl, policy });
    return policy;
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
