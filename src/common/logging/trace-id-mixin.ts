import { trace } from '@opentelemetry/api';

/**
 * A pino mixin that puts the active span's trace and span ids on every log line, so a line leads
 * to its trace. Installed only when tracing is on (LoggingModule); otherwise lines stay as they were.
 */
export function traceIdMixin(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}
