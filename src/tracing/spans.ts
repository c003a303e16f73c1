import { SpanKind, SpanStatusCode, trace, type Attributes } from '@opentelemetry/api';
import { tracingStarted } from './tracing';

const tracer = trace.getTracer('personality-api');

/**
 * Runs `work` inside a client span (calls to the payment provider and the response engine, which
 * HTTP instrumentation alone would show as anonymous requests or not at all). With tracing off
 * it is a plain call.
 */
export function inClientSpan<T>(
  name: string,
  attributes: Attributes,
  work: () => Promise<T>,
): Promise<T> {
  if (!tracingStarted()) return work();
  return tracer.startActiveSpan(name, { kind: SpanKind.CLIENT, attributes }, async (span) => {
    try {
      return await work();
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: failureOf(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * What a span says of a failure: the error's kind, code and HTTP status, never its message. A
 * provider's or gateway's message may quote the request (the end user's words) or a key, and
 * traces keep what logs do not (found by review).
 */
export function failureOf(error: unknown): string {
  if (typeof error !== 'object' || error === null) return typeof error;
  const { code, status, statusCode } = error as Record<string, unknown>;
  const parts = [kindOf(error)];
  if (typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code)) parts.push(code);
  const httpStatus = typeof status === 'number' ? status : statusCode;
  if (typeof httpStatus === 'number') parts.push(`HTTP ${httpStatus}`);
  return parts.join(' ');
}

/** The error's class, else its name: the SDKs' errors (openai's BadRequestError) keep "Error" as name. */
function kindOf(error: object): string {
  const className = (error as { constructor?: { name?: unknown } }).constructor?.name;
  if (typeof className === 'string' && className !== 'Error' && className !== 'Object') {
    return className;
  }
  const { name } = error as { name?: unknown };
  return typeof name === 'string' ? name : 'Error';
}
