import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { IS_PUBLIC, REQUIRED_SCOPE, USER_ONLY } from '../common/auth/auth.decorators';
import { type RequestWithCaller, type Scope, scopeSatisfies } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { requestIdOf } from '../common/http/request-id';
import { CallerResolver } from './caller-resolver.service';

/**
 * The global guard: deny by default. A route opens only through @Public(), @Scopes() or
 * @UserOnly(); the caller reaches handlers through @Caller().
 */
@Injectable()
export class AuthenticationGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly callers: CallerResolver,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(IS_PUBLIC, targets)) return true;
    const scope = this.reflector.getAllAndOverride<Scope | undefined>(REQUIRED_SCOPE, targets);
    const userOnly = this.reflector.getAllAndOverride<boolean>(USER_ONLY, targets) ?? false;
    if (!scope && !userOnly) {
      throw new AppError('forbidden', 'This route declares no access rule');
    }

    const caller = await this.callers.resolve(context);
    if (!caller) throw AppError.unauthenticated();
    if (userOnly && caller.kind !== 'user') {
      throw new AppError(
        'user_token_required',
        'This endpoint acts for a user: use an access token',
      );
    }
    if (scope && !scopeSatisfies(caller.scopes, scope)) {
      throw new AppError('insufficient_scope', `This endpoint needs the ${scope} scope`);
    }
    const request = context.switchToHttp().getRequest<RequestWithCaller & Request>();
    // `request.ip` honours X-Forwarded-For only under TRUST_PROXY.
    request.caller = { ...caller, requestId: requestIdOf(request), ip: request.ip };
    return true;
  }
}
