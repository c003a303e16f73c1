import { APIError } from 'openai';
import { maskAddresses } from './mask-address';

interface SerializedError {
  type: string;
  message?: string;
  code?: string;
  /** A provider's HTTP status and its error's own type (an OpenAI-compatible body's `type`). */
  status?: number;
  errorType?: string;
  constraint?: string;
  table?: string;
  stack?: string;
}

interface DatabaseFields {
  code?: unknown;
  constraint?: unknown;
  table?: unknown;
}

function isDatabaseError(error: Error): boolean {
  // TypeORM's QueryFailedError, or the pg driver's DatabaseError: both carry a SQLSTATE `code`.
  return (
    error.name === 'QueryFailedError' ||
    typeof (error as { routine?: unknown }).routine === 'string'
  );
}

/**
 * What a log line says about an error: its type and, for database errors, the SQLSTATE code and
 * the constraint or table, never the message, the SQL parameters or the driver's `detail`, which
 * quote the request's content (`Key (user_id)=(…)`, `invalid input syntax: "…"`). Other errors
 * keep their message and stack (our own messages, written to name the problem, not the data),
 * with any e-mail address in them masked: a mail server's refusal quotes the recipient. A model
 * or embeddings provider's error (the `openai` SDK's APIError) keeps its status, code and type,
 * never its message, which is the provider's body and may quote the input it was sent: an end
 * user's message, in a line no erasure reaches (found by review).
 */
export function serializeError(value: unknown): unknown {
  if (!(value instanceof Error)) return value;
  if (value instanceof APIError) {
    return {
      // The SDK's errors are all named 'Error': the class says which (BadRequestError, …).
      type: value.constructor.name,
      status: typeof value.status === 'number' ? value.status : undefined,
      code: typeof value.code === 'string' ? value.code : undefined,
      errorType: typeof value.type === 'string' ? value.type : undefined,
      stack: value.stack?.split('\n').slice(1).join('\n'),
    } satisfies SerializedError;
  }
  const error = value as Error & DatabaseFields & { driverError?: DatabaseFields };
  if (isDatabaseError(error)) {
    const source = error.driverError ?? error;
    const stack = error.stack?.split('\n').slice(1).join('\n');
    return {
      type: error.name,
      code: typeof source.code === 'string' ? source.code : undefined,
      constraint: typeof source.constraint === 'string' ? source.constraint : undefined,
      table: typeof source.table === 'string' ? source.table : undefined,
      stack,
    } satisfies SerializedError;
  }
  return {
    type: error.name,
    message: maskAddresses(error.message),
    code: typeof error.code === 'string' ? error.code : undefined,
    stack: error.stack === undefined ? undefined : maskAddresses(error.stack),
  } satisfies SerializedError;
}
