import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ApiBearerAuth, ApiForbiddenResponse, ApiUnauthorizedResponse } from '@nestjs/swagger';
import { ErrorEnvelopeDto } from '../errors/error-envelope';
import type { Scope } from './caller';

export const IS_PUBLIC = 'auth:public';
export const REQUIRED_SCOPE = 'auth:scope';
export const USER_ONLY = 'auth:user-only';
export const BEARER_AUTH = 'bearer';

/** No credential needed. Every route must declare either this, @Scopes() or @UserOnly(). */
export const Public = () => SetMetadata(IS_PUBLIC, true);

function authenticatedDocs() {
  return applyDecorators(
    ApiBearerAuth(BEARER_AUTH),
    ApiUnauthorizedResponse({
      description: 'No credential, or a bad one (`unauthenticated`)',
      type: ErrorEnvelopeDto,
    }),
  );
}

/** Needs an access token or an API key holding this scope (or a higher one). */
export const Scopes = (scope: Scope) =>
  applyDecorators(
    SetMetadata(REQUIRED_SCOPE, scope),
    authenticatedDocs(),
    ApiForbiddenResponse({
      description: `The credential lacks the \`${scope}\` scope (\`insufficient_scope\`), or X-Organization-Id names a foreign organization (\`not_a_member\`)`,
      type: ErrorEnvelopeDto,
    }),
  );

/** Acts for the logged-in user: API keys answer 403 `user_token_required`. */
export const UserOnly = () =>
  applyDecorators(
    SetMetadata(USER_ONLY, true),
    authenticatedDocs(),
    ApiForbiddenResponse({
      description: 'An API key was used (`user_token_required`)',
      type: ErrorEnvelopeDto,
    }),
  );
