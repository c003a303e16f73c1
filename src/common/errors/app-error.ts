import { ERROR_STATUS, type ErrorCode } from './error-codes';

/** One problem with one field of a request, listed in the envelope's `details`. */
export interface FieldProblem {
  field: string;
  problem: string;
}

export interface AppErrorOptions {
  /** Listed in the envelope's `details` (validation errors). */
  details?: FieldProblem[];
  /**
   * The envelope's `details` as one object instead of a list of field problems, for the codes
   * whose contract says so (402 `budget_exceeded`: `{scope, limit, used, resets_at}`).
   */
  detailsObject?: Readonly<Record<string, unknown>>;
  /** Sent with the error response (e.g. Retry-After). */
  headers?: Record<string, string>;
  /** Extra envelope fields the contract names for this code (e.g. `checks` of not_ready). */
  extra?: Record<string, unknown>;
}

/**
 * A domain error with a stable code; its status comes from the code (error-codes.ts). Services
 * throw it; the global filter writes the envelope.
 */
export class AppError extends Error {
  readonly status: number;
  readonly details?: FieldProblem[];
  readonly detailsObject?: Readonly<Record<string, unknown>>;
  readonly headers?: Record<string, string>;
  readonly extra?: Record<string, unknown>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: AppErrorOptions = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
    this.details = options.details;
    this.detailsObject = options.detailsObject;
    this.headers = options.headers;
    this.extra = options.extra;
  }

  static notFound(what = 'Resource'): AppError {
    return new AppError('not_found', `${what} not found`);
  }

  static unauthenticated(message = 'A valid credential is required'): AppError {
    return new AppError('unauthenticated', message);
  }

  static validation(details: FieldProblem[], message = 'The request is not valid'): AppError {
    return new AppError('validation_failed', message, { details });
  }
}
