import type { ExecutionContext } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import type { AuthenticatedCaller } from '../common/auth/caller';

/**
 * Who is calling, worked out from `Authorization: Bearer …` once per request, so the rate
 * limiter (which runs first and needs the caller's organization for its bucket) and the
 * authentication guard share one lookup. Implemented by AuthenticationGuard, which AuthModule
 * provides under this token.
 */
export abstract class CallerResolver {
  /**
   * True when resolving the request's credential would query the database for it: an API key
   * this instance has not seen within its cache's lifetime. (An access token is verified by its
   * signature first, so a forged one never reaches the database.)
   */
  abstract needsLookup(request: IncomingMessage): boolean;

  /** null without a credential; throws 401 (or 403 `not_a_member`) for a bad one. */
  abstract resolve(context: ExecutionContext): Promise<AuthenticatedCaller | null>;
}
