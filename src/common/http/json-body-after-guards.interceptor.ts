import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import { from, mergeMap, type Observable } from 'rxjs';
import type { LateJsonRequest } from './json-body.middleware';

/**
 * Parses a large JSON route's body (JsonBodyOptions.largeJsonRoutes) once the guards have let
 * the request through: neither an unauthenticated client nor one over its rate limit gets
 * megabytes parsed. A body refused unread is discarded by Node as the answer ends.
 */
@Injectable()
export class JsonBodyAfterGuardsInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<LateJsonRequest>();
    const parse = request.parseJsonBody;
    if (!parse) return next.handle();
    request.parseJsonBody = undefined;
    return from(parse()).pipe(mergeMap(() => next.handle()));
  }
}

/**
 * On the handler of every large JSON route, below any interceptor that reads the body
 * (Idempotency-Key's) so that it runs first.
 */
export const ParsesJsonBodyAfterGuards = (): MethodDecorator =>
  UseInterceptors(JsonBodyAfterGuardsInterceptor);
