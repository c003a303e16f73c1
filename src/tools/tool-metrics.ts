import { Injectable } from '@nestjs/common';
import type { Counter, Histogram } from 'prom-client';
import { MetricsService } from '../metrics/metrics.service';
import type { ToolExecution } from './tool-definitions';

/**
 * What became of a tool call: `ok`; `error` (a webhook tool failed: timeout, status, redirect,
 * bad body, endpoint gone); `invalid` (no such tool, or arguments that fail its schema: never
 * sent); `throttled` (TOOL_CALLS_IN_FLIGHT_PER_ORG reached).
 */
export type ToolCallOutcome = 'ok' | 'error' | 'invalid' | 'throttled';

const EXECUTIONS: readonly ToolExecution[] = ['client', 'webhook'];
const OUTCOMES: readonly ToolCallOutcome[] = ['ok', 'error', 'invalid', 'throttled'];

/** `tool_calls_total{execution,outcome}` and `tool_call_duration_seconds{execution}`. */
@Injectable()
export class ToolMetrics {
  private readonly calls: Counter<'execution' | 'outcome'>;
  private readonly duration: Histogram<'execution'>;

  constructor(metrics: MetricsService) {
    this.calls = metrics.counter({
      name: 'tool_calls_total',
      help: 'Tool calls of personalities by execution (client, webhook) and outcome (ok, error, invalid, throttled)',
      labelNames: ['execution', 'outcome'],
    });
    this.duration = metrics.histogram({
      name: 'tool_call_duration_seconds',
      help: "Webhook tool calls' time, from the request to the endpoint's whole answer",
      labelNames: ['execution'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    });
    // Every series from the start: dashboards see 0 rather than nothing.
    for (const execution of EXECUTIONS) {
      for (const outcome of OUTCOMES) this.calls.labels({ execution, outcome });
    }
  }

  count(execution: ToolExecution, outcome: ToolCallOutcome, durationMs: number | null): void {
    this.calls.labels({ execution, outcome }).inc();
    if (durationMs !== null) this.duration.labels({ execution }).observe(durationMs / 1000);
  }
}
