/**
 * Every error code the API answers with, and its HTTP status: the contract's table (§4) and the
 * codes its later sections add (docs/decisions.md lists the ones beyond the table). A code is
 * thrown as `new AppError('code', message)`, so the status of a code is decided here once.
 */
export const ERROR_STATUS = {
  validation_failed: 400,
  malformed_json: 400,
  invalid_reset_token: 400,
  invalid_signature: 400,
  invalid_invitation: 400,
  unknown_provider: 400,
  unauthenticated: 401,
  invalid_credentials: 401,
  invalid_id_token: 401,
  forbidden: 403,
  insufficient_scope: 403,
  insufficient_role: 403,
  not_a_member: 403,
  user_token_required: 403,
  invitation_email_mismatch: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  email_taken: 409,
  end_user_under_deletion: 409,
  sso_identity_taken: 409,
  subscription_exists: 409,
  subscription_not_active: 409,
  last_owner: 409,
  already_a_member: 409,
  webhook_endpoint_disabled: 409,
  webhook_endpoint_limit: 409,
  idempotency_key_in_progress: 409,
  request_timeout: 408,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unprocessable_entity: 422,
  idempotency_key_reused: 422,
  login_locked: 423,
  rate_limited: 429,
  too_many_streams: 429,
  headers_too_large: 431,
  internal_error: 500,
  payment_provider_error: 502,
  engine_unavailable: 502,
  billing_not_configured: 503,
  not_ready: 503,
  service_unavailable: 503,
  engine_timeout: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** The code Nest's own HTTP exceptions (unknown route, wrong method…) answer with, by status. */
export const CODE_OF_STATUS: Partial<Record<number, ErrorCode>> = {
  400: 'validation_failed',
  401: 'unauthenticated',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  422: 'unprocessable_entity',
  429: 'rate_limited',
  503: 'service_unavailable',
};
