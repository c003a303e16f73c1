import { ExecutionContext, Injectable } from '@nestjs/common';
import { AuthGuard } from '@nestjs/passport';
import type { IncomingMessage } from 'node:http';
import { looksLikeApiKey } from '../api-keys/api-key-format';
import { ApiKeysService } from '../api-keys/api-keys.service';
import type { CallerContext } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { JwtStrategy } from './strategies/jwt.strategy';

type ResolvableRequest = IncomingMessage & {
  user?: CallerContext;
  resolvedCaller?: Promise<CallerContext | null>;
};

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** Runs the passport-jwt strategy and maps every failure to 401 `unauthenticated`. */
class AccessTokenGuard extends AuthGuard('jwt') {
  override handleRequest<TUser = CallerContext>(error: unknown, user: TUser | false): TUser {
    if (error instanceof AppError) throw error;
    if (error || !user) throw AppError.unauthenticated();
    return user;
  }
}

/**
 * Works out who is calling from `Authorization: Bearer …`, once per request (memoised on it), so
 * the rate limiter and the authentication guard share one lookup. Credentials starting with
 * `pk_` are API keys; anything else is an access token for the passport-jwt strategy.
 */
@Injectable()
export class CallerResolver {
  private readonly accessTokens = new AccessTokenGuard();

  constructor(
    private readonly apiKeys: ApiKeysService,
    private readonly jwtStrategy: JwtStrategy,
  ) {}

  /**
   * True when resolving the request's credential would query the database for it: an API key
   * this instance has not seen within its cache's lifetime. (An access token is verified by its
   * signature first, so a forged one never reaches the database.)
   */
  needsLookup(request: IncomingMessage): boolean {
    const credential = BEARER.exec(request.headers.authorization ?? '')?.[1];
    return !!credential && looksLikeApiKey(credential) && this.apiKeys.needsLookup(credential);
  }

  /** null without a credential; throws 401 (or 403 `not_a_member`) for a bad one. */
  resolve(context: ExecutionContext): Promise<CallerContext | null> {
    const request = context.switchToHttp().getRequest<ResolvableRequest>();
    request.resolvedCaller ??= this.resolveUncached(context, request);
    return request.resolvedCaller;
  }

  private async resolveUncached(
    context: ExecutionContext,
    request: ResolvableRequest,
  ): Promise<CallerContext | null> {
    const header = request.headers.authorization;
    if (header === undefined) return null;
    const credential = BEARER.exec(header)?.[1];
    if (!credential) throw AppError.unauthenticated();
    if (looksLikeApiKey(credential)) {
      const caller = await this.apiKeys.authenticate(credential);
      if (!caller) throw AppError.unauthenticated();
      return caller;
    }
    const verifiedBefore = this.jwtStrategy.recall(credential);
    if (verifiedBefore) {
      return this.jwtStrategy.callerFor(request, verifiedBefore);
    }
    await this.accessTokens.canActivate(context);
    return request.user ?? null;
  }
}
