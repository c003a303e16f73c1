/** One problem with one field of a request, listed in the envelope's `details`. */
export interface FieldProblem {
  field: string;
  problem: string;
}

/**
 * A domain error with a stable code. Services throw it; the global filter writes the envelope.
 * `headers` are sent with the error response (e.g. Retry-After).
 */
export class AppError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    message: string,
    readonly details?: FieldProblem[],
    readonly headers?: Record<string, string>,
    readonly extra?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'AppError';
  }

  static notFound(what = 'Resource'): AppError {
    return new AppError('not_found', 404, `${what} not found`);
  }

  static unauthenticated(message = 'A valid credential is required'): AppError {
    return new AppError('unauthenticated', 401, message);
  }

  static validation(details: FieldProblem[], message = 'The request is not valid'): AppError {
    return new AppError('validation_failed', 400, message, details);
  }
}
