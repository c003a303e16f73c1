import { ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthGuard } from '@nestjs/passport';
import type { Request } from 'express';
import type { IncomingMessage } from 'node:http';
import { looksLikeApiKey } from '../api-keys/api-key-format';
import { ApiKeysService } from '../api-keys/api-keys.service';
import { IS_PUBLIC, REQUIRED_SCOPE, USER_ONLY } from '../common/auth/auth.decorators';
import {
  type AuthenticatedCaller,
  type RequestWithCaller,
  type Scope,
  scopeSatisfies,
} from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { requestIdOf } from '../common/http/request-id';
import type { CallerResolver } from './caller-resolver.service';

const BEARER = /^Bearer\s+(\S+)\s*$/i;

type AuthenticatingRequest = Request &
  RequestWithCaller & {
    /** Set by passport (AuthGuard) from JwtStrategy.validate(). */
    user?: AuthenticatedCaller;
    /** The memo of resolve(): one lookup per request, whoever asks first. */
    resolvedCaller?: Promise<AuthenticatedCaller | null>;
  };

/**
 * The global guard: deny by default. A route opens only through @Public(), @Scopes() or
 * @UserOnly(); the caller reaches handlers through @Caller().
 *
 * Credentials starting with `pk_` are API keys (ApiKeysService); any other bearer credential is
 * an access token, authenticated by passport's AuthGuard('jwt'), i.e. by JwtStrategy. It is also
 * the CallerResolver the rate limiter asks before this guard runs (resolve() is memoised on the
 * request, so the credential is checked once).
 */
@Injectable()
export class AuthenticationGuard extends AuthGuard('jwt') implements CallerResolver {
  constructor(
    private readonly reflector: Reflector,
    private readonly apiKeys: ApiKeysService,
  ) {
    super();
  }

  override async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(IS_PUBLIC, targets)) return true;
    const scope = this.reflector.getAllAndOverride<Scope | undefined>(REQUIRED_SCOPE, targets);
    const userOnly = this.reflector.getAllAndOverride<boolean>(USER_ONLY, targets) ?? false;
    if (!scope && !userOnly) {
      throw new AppError('forbidden', 'This route declares no access rule');
    }

    const caller = await this.resolve(context);
    if (!caller) throw AppError.unauthenticated();
    if (userOnly && caller.kind !== 'user') {
      throw new AppError(
        'user_token_required',
        'This endpoint acts for a user: use an access token',
      );
    }
    if (!userOnly && caller.organizationId === null) {
      throw new AppError(
        'not_a_member',
        'You belong to no organization: create one or accept an invitation first',
      );
    }
    if (scope && !scopeSatisfies(caller.scopes, scope)) {
      throw new AppError('insufficient_scope', `This endpoint needs the ${scope} scope`);
    }
    const request = context.switchToHttp().getRequest<AuthenticatingRequest>();
    // `request.ip` honours X-Forwarded-For only under TRUST_PROXY.
    request.caller = { ...caller, requestId: requestIdOf(request), ip: request.ip };
    return true;
  }

  needsLookup(request: IncomingMessage): boolean {
    const credential = BEARER.exec(request.headers.authorization ?? '')?.[1];
    return !!credential && looksLikeApiKey(credential) && this.apiKeys.needsLookup(credential);
  }

  resolve(context: ExecutionContext): Promise<AuthenticatedCaller | null> {
    const request = context.switchToHttp().getRequest<AuthenticatingRequest>();
    request.resolvedCaller ??= this.resolveOnce(context, request);
    return request.resolvedCaller;
  }

  /**
   * Passport's hook for the strategy's outcome. A token that fails verification comes as no user:
   * 401 `unauthenticated`. An error is what JwtStrategy.validate threw: its own AppError, or a
   * lookup that failed (the database out of reach), which goes to the exception filter as any
   * request's does (503 `service_unavailable`): the credential is not at fault, and a 401 would
   * have the client drop it.
   */
  override handleRequest<TUser = AuthenticatedCaller>(error: unknown, user: TUser | false): TUser {
    // Not `instanceof Error` alone: a socket's error (ECONNREFUSED) is made in Node's own realm,
    // which under Jest is not the code's.
    if (error !== null && typeof error === 'object') throw error as Error;
    if (error || !user) throw AppError.unauthenticated();
    return user;
  }

  private async resolveOnce(
    context: ExecutionContext,
    request: AuthenticatingRequest,
  ): Promise<AuthenticatedCaller | null> {
    const header = request.headers.authorization;
    if (header === undefined) return null;
    const credential = BEARER.exec(header)?.[1];
    if (!credential) throw AppError.unauthenticated();
    if (looksLikeApiKey(credential)) {
      const caller = await this.apiKeys.authenticate(credential);
      if (!caller) throw AppError.unauthenticated();
      // A user-only route refuses the key itself (user_token_required), whatever the header says.
      const userOnly = this.reflector.getAllAndOverride<boolean>(USER_ONLY, [
        context.getHandler(),
        context.getClass(),
      ]);
      if (!userOnly) assertHeaderNamesKeyOrganization(request, caller.organizationId);
      return caller;
    }
    // Passport runs JwtStrategy (signature, algorithm, aud, iss, exp, then validate()) and sets
    // request.user, or handleRequest throws.
    await super.canActivate(context);
    return request.user ?? null;
  }
}

/**
 * A key acts for its own organization: an `X-Organization-Id` naming another (or no
 * organization) is refused as a token's would be (403 `not_a_member`), where it was ignored and
 * the request acted on the key's organization, not the one the client named (found by review).
 */
function assertHeaderNamesKeyOrganization(
  request: IncomingMessage,
  organizationId: string | null,
): void {
  const named = request.headers['x-organization-id'];
  if (named === undefined) return;
  if (typeof named === 'string' && named.toLowerCase() === organizationId) return;
  throw new AppError(
    'not_a_member',
    'This API key belongs to another organization than X-Organization-Id names',
  );
}
