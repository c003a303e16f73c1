import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { BeforeErrorReply } from '../errors/before-error-reply';

/**
 * For routes mounted on Express beside Nest's (the OpenAPI document and its UI, which
 * SwaggerModule serves itself): no guard runs there, so they are charged to the client's bucket
 * as an unknown route is, and carry the rate-limit headers every response carries (contract §5).
 * An empty bucket answers 429 through the exception filter.
 */
export function chargedOutsideNest(beforeReply: BeforeErrorReply | null): RequestHandler {
  return (request: Request, response: Response, next: NextFunction) => {
    if (!beforeReply) return next();
    beforeReply(request, response).then(
      (refusal) => next(refusal ?? undefined),
      (error: unknown) => next(error),
    );
  };
}
