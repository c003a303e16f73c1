import { ExecutionContext, Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { Reflector } from '@nestjs/core';
import { normalizeIp } from '@nestjs/throttler';
import type { Request } from 'express';
import { isIPv4 } from 'node:net';
import { CallerResolver } from '../auth/caller-resolver.service';
import { IS_PUBLIC } from '../common/auth/auth.decorators';
import { TtlCache } from '../common/cache/ttl-cache';
import type { RateLimitConfig } from '../config/rate-limit.config';
import { OrganizationsService } from '../organizations/organizations.service';
import { isAuthRateLimited } from './auth-routes';
import type { BucketPolicy } from './token-bucket';

export interface Bucket {
  key: string;
  policy: BucketPolicy;
}

/** How long a plan's new limit may take to reach every instance. */
export const ORG_POLICY_CACHE_MS = 10_000;

/**
 * Picks the bucket a request draws from:
 * - login, forgot-password, reset-password: the client IP's auth bucket;
 * - public routes: the client IP's bucket (no credential lookup at all);
 * - other routes: the caller's organization's bucket, sized by its plan's override if any;
 *   without a credential, or with a bad one, the client IP's bucket (so a flood of bad
 *   credentials is throttled per address, and its 401s carry headers).
 */
@Injectable()
export class BucketResolver {
  private readonly config: RateLimitConfig;
  private readonly orgPolicies = new TtlCache<BucketPolicy>(ORG_POLICY_CACHE_MS);

  constructor(
    configService: ConfigService,
    private readonly reflector: Reflector,
    private readonly callers: CallerResolver,
    private readonly organizations: OrganizationsService,
  ) {
    this.config = configService.getOrThrow<RateLimitConfig>('rateLimit');
  }

  /** The client's address; `request.ip` honours X-Forwarded-For only under TRUST_PROXY. */
  static clientIp(request: Request): string {
    const ip = request.ip ?? request.socket.remoteAddress ?? 'unknown';
    // IPv4, plain or IPv4-mapped, skips the IPv6 parsing below (a few µs on every request).
    if (isIPv4(ip)) return ip;
    if (ip.startsWith('::ffff:') && isIPv4(ip.slice(7))) return ip.slice(7);
    // IPv6 clients get a /64 each (one subscriber's allocation), else they could rotate at will.
    return normalizeIp(ip);
  }

  /**
   * The client IP's bucket when this request's credential would cost a database lookup (an API
   * key not cached here): the address pays for the lookup before it is made, so a flood of
   * forged keys is refused with 429 after the IP burst instead of reaching the database.
   */
  lookupBucket(context: ExecutionContext, clientIp: string): Bucket | null {
    const request = context.switchToHttp().getRequest<Request>();
    // Cheapest first: most requests carry no API key, or one this instance knows.
    if (!this.callers.needsLookup(request)) return null;
    if (isAuthRateLimited(request.method, request.path) || this.isPublic(context)) return null;
    return this.ipBucket(clientIp);
  }

  /** For a request the router dispatched to a handler. */
  async forRoute(context: ExecutionContext, clientIp: string): Promise<Bucket> {
    const request = context.switchToHttp().getRequest<Request>();
    if (isAuthRateLimited(request.method, request.path)) return this.authBucket(clientIp);
    if (this.isPublic(context)) return this.ipBucket(clientIp);
    let organizationId: string | undefined;
    try {
      organizationId = (await this.callers.resolve(context))?.organizationId;
    } catch {
      // A bad credential: the authentication guard answers 401/403 next; the IP pays for it.
    }
    if (!organizationId) return this.ipBucket(clientIp);
    return { key: `org:${organizationId}`, policy: await this.orgPolicy(organizationId) };
  }

  /** For a request no handler will see (unknown route, refused body): by address only. */
  forUnrouted(request: Request): Bucket {
    const clientIp = BucketResolver.clientIp(request);
    return isAuthRateLimited(request.method, request.path)
      ? this.authBucket(clientIp)
      : this.ipBucket(clientIp);
  }

  private isPublic(context: ExecutionContext): boolean {
    return !!this.reflector.getAllAndOverride<boolean>(IS_PUBLIC, [
      context.getHandler(),
      context.getClass(),
    ]);
  }

  private ipBucket(clientIp: string): Bucket {
    return { key: `ip:${clientIp}`, policy: { name: 'ip', ...this.config.ip } };
  }

  private authBucket(clientIp: string): Bucket {
    return { key: `auth:${clientIp}`, policy: { name: 'auth', ...this.config.auth } };
  }

  private async orgPolicy(organizationId: string): Promise<BucketPolicy> {
    const cached = this.orgPolicies.get(organizationId);
    if (cached) return cached;
    const override = await this.organizations.rateLimitOverride(organizationId);
    const policy: BucketPolicy = {
      name: 'org',
      rps: override.rps ?? this.config.org.rps,
      burst: override.burst ?? this.config.org.burst,
    };
    this.orgPolicies.set(organizationId, policy);
    return policy;
  }
}
