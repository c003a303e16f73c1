import { createParamDecorator, ExecutionContext } from '@nestjs/common';

export const SCOPES = ['read', 'read_write', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

const SCOPE_RANK: Record<Scope, number> = { read: 1, read_write: 2, admin: 3 };

/** read < read_write < admin: each scope includes the ones before it. */
export function scopeSatisfies(held: readonly Scope[], required: Scope): boolean {
  return held.some((scope) => SCOPE_RANK[scope] >= SCOPE_RANK[required]);
}

interface CallerBase {
  organizationId: string;
  scopes: Scope[];
  /** The request's id and client address, set by the authentication guard for the audit log. */
  requestId?: string;
  ip?: string;
}

/** A user acting in one organization, through an access token. */
export interface UserCaller extends CallerBase {
  kind: 'user';
  userId: string;
  /**
   * The access token's version (`ver`): a write that must not outlive a password reset checks
   * it against the user's row under a lock (the reset raises it). Absent for a caller the
   * service builds itself.
   */
  tokenVersion?: number;
  /**
   * The access token itself, as POST /v1/auth/logout ends it: its SHA-256 (never the token) and
   * when it expires. Absent for a caller the service builds itself.
   */
  token?: { hash: Buffer; expiresAt: Date };
}

/**
 * An API key's own bucket: its size, and the id that names it in the bucket store, which a
 * rolled key takes over from the key it replaces (contract §29).
 */
export interface KeyBucket {
  bucketId: string;
  rps: number;
  burst: number;
}

/** An organization's API key. */
export interface ApiKeyCaller extends CallerBase {
  kind: 'api_key';
  apiKeyId: string;
  /** The key's own bucket, drawn from besides the organization's; null: none. */
  rateLimit?: KeyBucket | null;
}

/** Who is calling: narrowed by `kind`. */
export type CallerContext = UserCaller | ApiKeyCaller;

/**
 * A user whose access token acts in no organization, because they belong to none (removed from
 * their last, or left it) and sent no X-Organization-Id. Only @UserOnly() routes let them in:
 * they can still see themselves, create an organization or accept an invitation.
 */
export interface OrganizationlessUser extends Omit<UserCaller, 'organizationId' | 'scopes'> {
  organizationId: null;
  scopes: [];
}

/** Who the authentication guard lets through: any caller, or a user in no organization. */
export type AuthenticatedCaller = CallerContext | OrganizationlessUser;

/** The caller of a @UserOnly() route: a user, in an organization or in none. */
export type ActingUserCaller = UserCaller | OrganizationlessUser;

export type RequestWithCaller = { caller?: AuthenticatedCaller };

function callerOf(context: ExecutionContext): AuthenticatedCaller {
  const request = context.switchToHttp().getRequest<RequestWithCaller>();
  if (!request.caller) throw new Error('@Caller() used on a route without authentication');
  return request.caller;
}

/**
 * The organization a request acts for, read after the guard on a route that is not @UserOnly()
 * (where every caller has one); `use` says who asks, for the error a misplaced call throws.
 */
export function organizationOf(request: RequestWithCaller, use: string): string {
  const organizationId = request.caller?.organizationId;
  if (!organizationId) throw new Error(`${use} needs an authenticated organization`);
  return organizationId;
}

/** The authenticated caller, resolved by the global authentication guard. */
export const Caller = createParamDecorator(
  (_data: unknown, context: ExecutionContext): CallerContext => {
    const caller = callerOf(context);
    // The guard lets a user in no organization through @UserOnly() routes only.
    if (caller.organizationId === null) throw new Error('@Caller() used on a @UserOnly() route');
    return caller;
  },
);

/** The caller of a @UserOnly() route, typed as the user the guard let through. */
export const ActingUser = createParamDecorator(
  (_data: unknown, context: ExecutionContext): ActingUserCaller => {
    const caller = callerOf(context);
    if (caller.kind !== 'user')
      throw new Error('@ActingUser() used on a route without @UserOnly()');
    return caller;
  },
);
