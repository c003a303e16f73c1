import { applyDecorators, UseInterceptors } from '@nestjs/common';
import { ApiHeader, ApiResponse } from '@nestjs/swagger';
import { ErrorEnvelopeDto } from '../common/errors/error-envelope';
import { IdempotencyInterceptor } from './idempotency.interceptor';

/**
 * On every POST handler under /v1 but the Stripe webhook receiver: the route takes an
 * `Idempotency-Key` (contract §16, docs/idempotency.md), and its OpenAPI operation says so (the
 * header, the 422; setup-openapi.ts adds the 409 and the replay header to the answers of every
 * operation that declares the header). Per route rather than one global interceptor, because a
 * global interceptor puts every request, GETs included, through Nest's interceptor chain (rxjs
 * and two AsyncResource binds): a third of a small GET's CPU. test/route-access.e2e-spec.ts walks
 * the routes so that none is missed and no other carries it.
 */
export const AcceptsIdempotencyKey = (): MethodDecorator =>
  applyDecorators(
    UseInterceptors(IdempotencyInterceptor),
    ApiHeader({
      name: 'Idempotency-Key',
      required: false,
      description:
        '1..255 printable ASCII characters. A retry with the same key and request gets the stored answer with `Idempotent-Replayed: true` (kept 24 hours, per organization; per user on user-only endpoints)',
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    }),
    ApiResponse({
      status: 422,
      description:
        'The Idempotency-Key was used with another method, path or body (`idempotency_key_reused`)',
      type: ErrorEnvelopeDto,
    }),
  );
