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
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: error instanceof Error ? error.message : String(error),
      });
      throw error;
    } finally {
      span.end();
    }
  });
}
