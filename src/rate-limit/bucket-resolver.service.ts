import { ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { Reflector } from '@nestjs/core';
import { normalizeIp, type ThrottlerOptions } from '@nestjs/throttler';
import type { Request } from 'express';
import type { IncomingMessage } from 'node:http';
import { createHash } from 'node:crypto';
import { isIPv4 } from 'node:net';
import { CallerResolver } from '../auth/caller-resolver.service';
import { IS_PUBLIC } from '../common/auth/auth.decorators';
import { routeTemplateOf } from '../common/http/route-template';
import { Caches } from '../common/cache/caches';
import type { TtlCache } from '../common/cache/ttl-cache';
import { rateLimitConfig } from '../config/rate-limit.config';
import { userIdProblem } from '../end-users/dto/user-id';
import { OrganizationsService } from '../organizations/organizations.service';
import { LimitsService } from '../spend/limits.service';
import { ToolTurnsService } from '../tools/tool-turns.service';
import { isAuthRateLimited } from './auth-routes';
import { type BucketPolicy, throttlerLimits } from './token-bucket';

/** How long a plan's new limit may take to reach every instance. */
export const ORG_POLICY_CACHE_MS = 10_000;
/** A turn's end user never changes: kept as long as a paused turn lives by default. */
const TURN_END_USER_CACHE_MS = 600_000;

/**
 * The named throttlers, in the order they draw (RateLimitGuard keeps it): the narrower buckets,
 * `end_user` (an end user's on /v1/respond and its turns' resumptions) and `key` (an API key's own), before their
 * organization's, so that a request its own bucket refuses costs the organization nothing (found
 * by review: a rate-limited key that kept sending drained its organization's bucket, the owner's
 * console included).
 */
export const THROTTLER_NAMES = ['auth', 'ip', 'end_user', 'key', 'org'] as const;
export type ThrottlerName = (typeof THROTTLER_NAMES)[number];

type BucketSize = Pick<BucketPolicy, 'rps' | 'burst'>;

interface OrgBucket {
  /** null: a user in no organization, who draws a bucket of their own of the default size. */
  organizationId: string | null;
  /** What names the bucket in the store: the organization, or `user:<id>`. */
  tracker: string;
  policy: BucketPolicy;
  /**
   * The API key's own bucket, when the caller is a key that has one: `id` names it in the store,
   * the same for a key and the keys rolled from it.
   */
  key: { id: string; size: BucketSize } | null;
}

/**
 * Where an end user's bucket applies, by the route Express matched: a reply, and the resumption
 * of a paused turn with tools, which asks the model again for the same end user (found by review:
 * resumptions drew nothing, and a failed one given back could be retried at will).
 */
const END_USER_ROUTES: ReadonlyMap<string, 'reply' | 'resumption'> = new Map([
  ['POST /v1/respond', 'reply'],
  ['POST /v1/respond/turns/:turn_id/tool-outputs', 'resumption'],
]);

function endUserRoute(request: Request): 'reply' | 'resumption' | null {
  return END_USER_ROUTES.get(`${request.method} ${routeTemplateOf(request)}`) ?? null;
}

/**
 * A body's user_id as the validation pipe will accept it (its own rule: 256 characters, not
 * UTF-16 units, so an id of emoji is drawn from as any other), else none: the request is refused
 * before it reaches a reply, and no end user's bucket is drawn.
 */
function userIdOf(request: Request): string | null {
  const userId = (request.body as { user_id?: unknown } | undefined)?.user_id;
  return userIdProblem(userId) === null ? (userId as string) : null;
}

interface EndUserBucket {
  tracker: string;
  size: BucketSize;
}

const ORG_BUCKET = Symbol('rateLimitOrgBucket');
const END_USER_BUCKET = Symbol('rateLimitEndUserBucket');
type ClassifiedRequest = IncomingMessage & {
  [ORG_BUCKET]?: Promise<OrgBucket | null>;
  [END_USER_BUCKET]?: Promise<EndUserBucket | null>;
};

/** The size given to a throttler that takes nothing this request (its tracker is ''). */
const UNUSED: BucketSize = { rps: 1, burst: 1 };

/** The storage key of a bucket: `org:<id>`, `ip:<address>`, `auth:<address>`. */
export function bucketKey(name: string, tracker: string): string {
  return `${name}:${tracker}`;
}

/**
 * Decides which of the named throttlers (THROTTLER_NAMES) a request draws from (their skipIf),
 * and for the org throttler which organization and what size:
 * - login, sign-up, forgot-password, reset-password: the client IP's `auth` bucket only;
 * - public routes: the client IP's `ip` bucket (no credential lookup at all);
 * - other routes without a credential: the `ip` bucket;
 * - other routes with a credential: the caller's organization's `org` bucket, sized by its
 *   plan's override if any. A credential that costs a database lookup (an API key this instance
 *   has not cached) also draws from the `ip` bucket first, so the address pays for the lookup
 *   before it is made: a flood of forged keys is refused with 429 after the IP burst instead of
 *   reaching the database. A bad credential names no organization: the org throttler takes
 *   nothing, the authentication guard answers 401/403 next, and the error reply charges the
 *   client IP's bucket (BEFORE_ERROR_REPLY in rate-limit.module.ts), so floods of bad
 *   credentials are throttled per address and cannot spend a real organization's tokens.
 */
@Injectable()
export class BucketResolver {
  private readonly orgPolicies: TtlCache<BucketPolicy>;
  /** `<organization>:<turn id>` → the user_id whose bucket the turn's resumptions draw from. */
  private readonly turnEndUsers: TtlCache<string>;
  /** @Public() or not, by handler (and its class): metadata does not change after start-up. */
  private readonly publicHandlers = new WeakMap<object, { type: object; isPublic: boolean }>();

  constructor(
    @Inject(rateLimitConfig.KEY) private readonly config: ConfigType<typeof rateLimitConfig>,
    private readonly reflector: Reflector,
    private readonly callers: CallerResolver,
    private readonly organizations: OrganizationsService,
    private readonly limits: LimitsService,
    private readonly turns: ToolTurnsService,
    caches: Caches,
  ) {
    this.orgPolicies = caches.local(ORG_POLICY_CACHE_MS);
    this.turnEndUsers = caches.local(TURN_END_USER_CACHE_MS);
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

  /** The throttlers of ThrottlerModule's options: sizes, who draws, and the org's tracker. */
  throttlers(): ThrottlerOptions[] {
    const org = (context: ExecutionContext) => this.orgBucket(context);
    return [
      {
        name: 'auth',
        ...throttlerLimits(this.config.auth),
        skipIf: (context) => !this.drawsAuth(context),
      },
      {
        name: 'ip',
        ...throttlerLimits(this.config.ip),
        skipIf: (context) => !this.drawsIp(context),
      },
      {
        name: 'org',
        // Without an organization the guard takes nothing; these sizes are then unused.
        limit: async (context) =>
          throttlerLimits((await org(context))?.policy ?? this.config.org).limit,
        ttl: async (context) =>
          throttlerLimits((await org(context))?.policy ?? this.config.org).ttl,
        skipIf: (context) => !this.drawsOrg(context),
        getTracker: async (_request, context) => (await org(context))?.tracker ?? '',
      },
      {
        // An API key's own bucket (rate_limit), besides its organization's; none: nothing taken.
        name: 'key',
        limit: async (context) => throttlerLimits((await org(context))?.key?.size ?? UNUSED).limit,
        ttl: async (context) => throttlerLimits((await org(context))?.key?.size ?? UNUSED).ttl,
        skipIf: (context) => !this.drawsOrg(context),
        getTracker: async (_request, context) => (await org(context))?.key?.id ?? '',
      },
      {
        // An end user's bucket on /v1/respond and its turns' resumptions (the organization's
        // end_user_rate_limit).
        name: 'end_user',
        limit: async (context) =>
          throttlerLimits((await this.endUser(context))?.size ?? UNUSED).limit,
        ttl: async (context) => throttlerLimits((await this.endUser(context))?.size ?? UNUSED).ttl,
        skipIf: (context) => !this.drawsEndUser(context),
        getTracker: async (_request, context) => (await this.endUser(context))?.tracker ?? '',
      },
    ];
  }

  /** For a request no guard charged (unknown route, refused body, bad credential): by address. */
  forUnrouted(request: Request): {
    name: ThrottlerName;
    tracker: string;
    limit: number;
    ttl: number;
  } {
    const name = isAuthRateLimited(request.method, request.path) ? 'auth' : 'ip';
    return {
      name,
      tracker: BucketResolver.clientIp(request),
      ...throttlerLimits(this.config[name]),
    };
  }

  private drawsAuth(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<Request>();
    return isAuthRateLimited(request.method, request.path);
  }

  /** Public routes and calls without a credential; and a key lookup, paid before it is made. */
  private drawsIp(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<Request>();
    if (isAuthRateLimited(request.method, request.path)) return false;
    if (this.isPublic(context) || request.headers.authorization === undefined) return true;
    return this.callers.needsLookup(request);
  }

  private drawsOrg(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<Request>();
    return (
      request.headers.authorization !== undefined &&
      !isAuthRateLimited(request.method, request.path) &&
      !this.isPublic(context)
    );
  }

  private drawsEndUser(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<Request>();
    return this.drawsOrg(context) && endUserRoute(request) !== null;
  }

  /**
   * The end user's bucket of this reply or resumption, or null (no limit set, no usable user_id,
   * no such turn).
   */
  private endUser(context: ExecutionContext): Promise<EndUserBucket | null> {
    const request = context.switchToHttp().getRequest<ClassifiedRequest>();
    request[END_USER_BUCKET] ??= this.resolveEndUser(context);
    return request[END_USER_BUCKET];
  }

  private async resolveEndUser(context: ExecutionContext): Promise<EndUserBucket | null> {
    const organizationId = (await this.orgBucket(context))?.organizationId;
    if (!organizationId) return null;
    const request = context.switchToHttp().getRequest<Request>();
    const limits =
      this.limits.cached(organizationId) ?? (await this.limits.forOrganization(organizationId));
    if (!limits.endUserBucket) return null;
    const userId =
      endUserRoute(request) === 'resumption'
        ? await this.endUserOfTurn(organizationId, request)
        : userIdOf(request);
    if (userId === null) return null;
    // A digest: the key names no user_id in Redis, and is short whatever the id's length.
    const digest = createHash('sha256').update(userId).digest('base64url');
    return { tracker: `${organizationId}:${digest}`, size: limits.endUserBucket };
  }

  /**
   * A resumption's end user: its turn's (none: no such turn of the organization, which answers
   * 404). Read once per turn and instance, so retries of a refused resumption read nothing.
   */
  private async endUserOfTurn(organizationId: string, request: Request): Promise<string | null> {
    const turnId = (request.params as { turn_id?: string } | undefined)?.turn_id;
    if (!turnId) return null;
    const key = `${organizationId}:${turnId}`;
    const known = this.turnEndUsers.get(key);
    if (known !== undefined) return known;
    const userId = await this.turns.userIdOfTurn(organizationId, turnId);
    if (userId === undefined) return null;
    this.turnEndUsers.set(key, userId);
    return userId;
  }

  private orgBucket(context: ExecutionContext): Promise<OrgBucket | null> {
    const request = context.switchToHttp().getRequest<ClassifiedRequest>();
    request[ORG_BUCKET] ??= this.resolveOrgBucket(context);
    return request[ORG_BUCKET];
  }

  private async resolveOrgBucket(context: ExecutionContext): Promise<OrgBucket | null> {
    let caller: Awaited<ReturnType<CallerResolver['resolve']>>;
    try {
      caller = await this.callers.resolve(context);
    } catch {
      // A bad credential: the authentication guard answers 401/403 next; the address pays then.
      return null;
    }
    if (!caller) return null;
    const { organizationId } = caller;
    if (organizationId === null) {
      const policy: BucketPolicy = { name: 'org', ...this.config.org };
      return { organizationId, tracker: `user:${caller.userId}`, policy, key: null };
    }
    const key =
      caller.kind === 'api_key' && caller.rateLimit
        ? { id: caller.rateLimit.bucketId, size: caller.rateLimit }
        : null;
    const policy = await this.orgPolicy(organizationId);
    return { organizationId, tracker: organizationId, policy, key };
  }

  private isPublic(context: ExecutionContext): boolean {
    const handler = context.getHandler();
    const type = context.getClass();
    const known = this.publicHandlers.get(handler);
    if (known?.type === type) return known.isPublic;
    const isPublic = !!this.reflector.getAllAndOverride<boolean>(IS_PUBLIC, [handler, type]);
    this.publicHandlers.set(handler, { type, isPublic });
    return isPublic;
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
