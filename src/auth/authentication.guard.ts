import { ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthGuard } from '@nestjs/passport';
import type { IncomingMessage } from 'node:http';
import { ApiKeysService } from '../api-keys/api-keys.service';
import { looksLikeApiKey } from '../api-keys/api-key-format';
import { IS_PUBLIC, REQUIRED_SCOPE, USER_ONLY } from '../common/auth/auth.decorators';
import {
  type CallerContext,
  type RequestWithCaller,
  type Scope,
  scopeSatisfies,
} from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';

type AuthenticatedRequest = IncomingMessage & RequestWithCaller & { user?: CallerContext };

const unauthenticated = () =>
  new AppError('unauthenticated', 401, 'A valid credential is required');

/**
 * The global guard: deny by default. A route opens only through @Public(), @Scopes() or
 * @UserOnly(). Bearer credentials starting with `pk_` are API keys; anything else is an access
 * token checked by the passport-jwt strategy.
 */
@Injectable()
export class AuthenticationGuard extends AuthGuard('jwt') {
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
      throw new AppError('forbidden', 403, 'This route declares no access rule');
    }

    const request = context.switchToHttp().getRequest<AuthenticatedRequest>();
    const credential = bearerCredential(request);
    if (!credential) throw unauthenticated();

    let caller: CallerContext;
    if (looksLikeApiKey(credential)) {
      const byKey = await this.apiKeys.authenticate(credential);
      if (!byKey) throw unauthenticated();
      caller = byKey;
      if (userOnly)
        throw new AppError(
          'user_token_required',
          403,
          'This endpoint acts for a user: use an access token',
        );
    } else {
      await super.canActivate(context);
      caller = request.user!;
    }
    if (scope && !scopeSatisfies(caller.scopes, scope)) {
      throw new AppError('insufficient_scope', 403, `This endpoint needs the ${scope} scope`);
    }
    request.caller = caller;
    return true;
  }

  /** Passport's failures (bad signature, expired, wrong audience…) all answer 401 unauthenticated. */
  override handleRequest<TUser = CallerContext>(error: unknown, user: TUser | false): TUser {
    if (error instanceof AppError) throw error;
    if (error || !user) throw unauthenticated();
    return user;
  }
}

function bearerCredential(request: IncomingMessage): string | undefined {
  const header = request.headers.authorization;
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}
