import type { components } from './generated/openapi';

/** The `error` object of the service's error envelope (`{"error": {…}}`). */
export type ErrorBody = components['schemas']['ErrorBodyDto'];

/**
 * An error answer of the service: its HTTP status, the stable `code` programs branch on
 * (`not_found`, `end_user_under_deletion`, …), the message for people, the request id to quote to
 * support (the `X-Request-Id` header) and, for a 400, the field problems in `details` (for a 402
 * `budget_exceeded`, one object: `{scope, limit, used, resets_at}`).
 */
export class PersonalityApiError extends Error {
  override readonly name = 'PersonalityApiError';
  readonly status: number;
  readonly code: string;
  readonly requestId: string | null;
  readonly details: ErrorBody['details'];

  constructor(body: ErrorBody, requestId?: string | null) {
    super(body.message);
    this.status = body.status;
    this.code = body.code;
    this.requestId = body.request_id || requestId || null;
    this.details = body.details;
  }

  /**
   * The error of a typed call's `{error, response}`, e.g.
   * `if (error) throw PersonalityApiError.from(error, response)`. An answer that is not the
   * envelope (a proxy's HTML page) keeps its status, with the code `http_<status>`.
   */
  static from(error: unknown, response: Response): PersonalityApiError {
    const requestId = response.headers.get('x-request-id');
    if (isEnvelope(error)) return new PersonalityApiError(error.error, requestId);
    const text = typeof error === 'string' && error.length > 0 ? error : response.statusText;
    return new PersonalityApiError(
      {
        status: response.status,
        code: `http_${response.status}`,
        message: text || `HTTP ${response.status}`,
        request_id: requestId ?? '',
      },
      requestId,
    );
  }
}

export function isEnvelope(value: unknown): value is { error: ErrorBody } {
  if (typeof value !== 'object' || value === null || !('error' in value)) return false;
  const body = value.error as Partial<ErrorBody> | null;
  return typeof body?.code === 'string' && typeof body.status === 'number';
}
