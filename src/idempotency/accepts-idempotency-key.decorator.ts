import { UseInterceptors } from '@nestjs/common';
import { IdempotencyInterceptor } from './idempotency.interceptor';

/**
 * On every POST handler under /v1 but the Stripe webhook receiver: the route takes an
 * `Idempotency-Key` (contract §16, docs/idempotency.md). Per route rather than one global
 * interceptor, because a global interceptor puts every request, GETs included, through Nest's
 * interceptor chain (rxjs and two AsyncResource binds): a third of a small GET's CPU.
 * test/route-access.e2e-spec.ts walks the routes so that none is missed and no other carries it.
 */
export const AcceptsIdempotencyKey = (): MethodDecorator => UseInterceptors(IdempotencyInterceptor);
