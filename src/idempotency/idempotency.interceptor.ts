import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  StreamableFile,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request, Response } from 'express';
import { catchError, defer, finalize, from, mergeMap, Observable, of, throwError } from 'rxjs';
import { USER_ONLY } from '../common/auth/auth.decorators';
import type { RequestWithCaller } from '../common/auth/caller';
import { toErrorResponse } from '../common/errors/all-exceptions.filter';
import { requestIdOf } from '../common/http/request-id';
import { routeTemplateOf } from '../common/http/route-template';
import type { KeyRef } from './idempotency.repository';
import {
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  parseIdempotencyKey,
} from '../common/http/idempotency-key';
import { requestFingerprint } from './idempotency-request';
import { IdempotencyClaim, IdempotencyService } from './idempotency.service';
import { carriesEndUserData, personalityOfReply } from './end-user-answers';
import { isKeyedByTheRoute, secretFieldsOf } from './replay-secrets';

/**
 * `Idempotency-Key` on the routes that carry @AcceptsIdempotencyKey(): every POST under /v1 but
 * the Stripe webhook receiver (contract §16, docs/idempotency.md). Runs after the guards, so the
 * caller (whose organization, or user on user-only routes, scopes the key) is known, and before
 * the validation pipe and the handler. A request without the header costs one header lookup: no
 * database round trip.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  constructor(
    private readonly idempotency: IdempotencyService,
    private readonly reflector: Reflector,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    const http = context.switchToHttp();
    const request = http.getRequest<Request & RequestWithCaller>();
    const header = request.headers[IDEMPOTENCY_KEY_HEADER];
    if (header === undefined) return next.handle();
    return defer(() => {
      const key = parseIdempotencyKey(header);
      const caller = request.caller;
      // Public routes (sign-up, login, password reset, SSO login) have no tenant to scope a key
      // to and answer credentials that must not be stored: the key is checked, then ignored.
      if (!caller) return next.handle();
      const route = routeTemplateOf(request);
      if (isKeyedByTheRoute(request.method, route)) return next.handle();
      const userOnly = this.reflector.getAllAndOverride<boolean>(USER_ONLY, [
        context.getHandler(),
        context.getClass(),
      ]);
      // A user in no organization reaches @UserOnly() routes only: keyed to them as well.
      const ref: KeyRef =
        (userOnly && caller.kind === 'user') || caller.organizationId === null
          ? { scopeType: 'user', scopeId: caller.userId, key }
          : { scopeType: 'organization', scopeId: caller.organizationId, key };
      const response = http.getResponse<Response>();
      const requestId = requestIdOf(request);
      const fingerprint = requestFingerprint(request.method, request.originalUrl, request.body);
      const secretFields = secretFieldsOf(request.method, route);
      const endUser = {
        carriesData: carriesEndUserData(request.method, route),
        hint: userIdOf(request),
        personalityHint: personalityOfReply(request.method, route, request.body),
      };
      return from(this.idempotency.begin(ref, requestId, fingerprint, secretFields, endUser)).pipe(
        mergeMap((begun) =>
          begun.kind === 'replay'
            ? of(replay(response, begun.status, begun.body, requestId))
            : this.run(begun.claim, next, response, requestId),
        ),
      );
    });
  }

  private run(
    claim: IdempotencyClaim,
    next: CallHandler,
    response: Response,
    requestId: string,
  ): Observable<unknown> {
    let streaming = false;
    // next.handle() binds the handler to the async context it is called in: the claim's.
    return this.idempotency
      .runWithin(claim, () => next.handle())
      .pipe(
        mergeMap(async (value: unknown) => {
          if (value instanceof StreamableFile) {
            // Its producer stores the answer or gives the key up once it has ended
            // (recordAnswer, giveUpUnanswered), whether or not the client is still there.
            streaming = true;
            return value;
          }
          // The handler has returned: its work has committed. The key is marked done before
          // the answer leaves, so a client that has the answer never meets "in progress".
          await this.idempotency.settleAnswer(claim, response.statusCode, value);
          return value;
        }),
        catchError((error: unknown) => {
          const { status, body } = toErrorResponse(error, requestId);
          const code = (body.error as { code?: string }).code;
          return from(this.idempotency.settleError(claim, status, code, body)).pipe(
            mergeMap(() => throwError(() => error)),
          );
        }),
        // Torn down without an answer (the client left): the key is given up.
        finalize(() => {
          if (!streaming) void this.idempotency.giveUp(claim);
        }),
      );
  }
}

/** The request's `user_id`: the path's, else the body's (before validation: a hint only). */
function userIdOf(request: Request): string | undefined {
  const fromPath = request.params?.user_id;
  if (typeof fromPath === 'string') return fromPath;
  const fromBody = (request.body as { user_id?: unknown } | undefined)?.user_id;
  return typeof fromBody === 'string' ? fromBody : undefined;
}

/** The stored answer, as the first request had it, with its own request id. */
function replay(
  response: Response,
  status: number,
  body: string | null,
  requestId: string,
): unknown {
  response.status(status);
  response.setHeader(IDEMPOTENT_REPLAYED_HEADER, 'true');
  response.setHeader('Cache-Control', 'no-store');
  if (body === null) return undefined;
  const value = JSON.parse(body) as unknown;
  // An error envelope names the request that answers it (contract §4): the replay's own.
  const error = (value as { error?: { request_id?: unknown } } | null)?.error;
  if (status >= 400 && error && typeof error === 'object' && 'request_id' in error) {
    error.request_id = requestId;
  }
  return value;
}
