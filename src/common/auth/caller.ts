import { createParamDecorator, ExecutionContext } from '@nestjs/common';

export const SCOPES = ['read', 'read_write', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

const SCOPE_RANK: Record<Scope, number> = { read: 1, read_write: 2, admin: 3 };

/** read < read_write < admin: each scope includes the ones before it. */
export function scopeSatisfies(held: readonly Scope[], required: Scope): boolean {
  return held.some((scope) => SCOPE_RANK[scope] >= SCOPE_RANK[required]);
}

/** Who is calling: a user (access token) acting in one organization, or an organization's API key. */
export interface CallerContext {
  kind: 'user' | 'api_key';
  organizationId: string;
  scopes: Scope[];
  /** Set for access tokens. */
  userId?: string;
  /** Set for API keys. */
  apiKeyId?: string;
  /** The request's id and client address, set by the authentication guard for the audit log. */
  requestId?: string;
  ip?: string;
}

export type RequestWithCaller = { caller?: CallerContext };

/** The authenticated caller, resolved by the global authentication guard. */
export const Caller = createParamDecorator((_data: unknown, context: ExecutionContext) => {
  const request = context.switchToHttp().getRequest<RequestWithCaller>();
  if (!request.caller) throw new Error('@Caller() used on a route without authentication');
  return request.caller;
});
