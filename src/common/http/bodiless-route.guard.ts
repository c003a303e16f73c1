import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import type { Request } from 'express';
import { AppError } from '../errors/app-error';

// Parameters through which a handler reads the body, directly or through the whole request.
const BODY_READERS = new Set<number>([
  RouteParamtypes.BODY,
  RouteParamtypes.RAW_BODY,
  RouteParamtypes.REQUEST,
]);

/**
 * A handler that reads no body refuses one that has fields (API contract §14), so a client that
 * sends `{"price_id": …}` to the suspend route learns its mistake instead of being ignored. What a
 * handler reads is in its route-argument metadata; the answer is worked out once per handler.
 */
@Injectable()
export class BodilessRouteGuard implements CanActivate {
  private readonly readsBody = new WeakMap<object, boolean>();

  // A guard rather than an interceptor: the only global interceptor would put every request
  // through Nest's rxjs interceptor chain for a check that almost never applies.
  canActivate(context: ExecutionContext): boolean {
    const body = context.switchToHttp().getRequest<Request>().body as unknown;
    if (body && typeof body === 'object' && Object.keys(body).length > 0) {
      if (!this.handlerReadsBody(context)) {
        throw AppError.validation(
          Object.keys(body)
            .slice(0, 20)
            .map((field) => ({ field: field.slice(0, 200), problem: 'is not a known field' })),
          'This endpoint takes no body',
        );
      }
    }
    return true;
  }

  private handlerReadsBody(context: ExecutionContext): boolean {
    const handler = context.getHandler();
    let reads = this.readsBody.get(handler);
    if (reads === undefined) {
      const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, context.getClass(), handler.name) ??
        {}) as Record<string, unknown>;
      reads = Object.keys(args).some((key) => BODY_READERS.has(Number(key.split(':')[0])));
      this.readsBody.set(handler, reads);
    }
    return reads;
  }
}
