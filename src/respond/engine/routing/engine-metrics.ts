import { Injectable } from '@nestjs/common';
import type { Counter } from 'prom-client';
import { MetricsService } from '../../../metrics/metrics.service';

export type EngineOutcome = 'ok' | 'error' | 'timeout' | 'cancelled' | 'retried' | 'skipped';

/**
 * A personality's `model` is any string a customer sets: past this many distinct models the
 * rest share the label `other`, so a tenant cannot grow the series without bound.
 */
const MODEL_LABELS_MAX = 50;
export const OTHER_MODEL = 'other';

/**
 * `engine_requests_total{engine,model,outcome}`. Per reply, one of `ok` (labelled with the model
 * that wrote it), `error`, `timeout` or `cancelled` (the client left; labelled with the model
 * last tried); per route on the way, `retried` (an attempt failed and another followed, on the
 * same route or the next) and `skipped` (its circuit breaker was open). The local engine's model
 * label is empty.
 */
@Injectable()
export class EngineMetrics {
  private readonly requests: Counter<'engine' | 'model' | 'outcome'>;
  /** Labelled children by `engine\nmodel\noutcome`: prom-client hashes labels on every call. */
  private readonly children = new Map<string, { inc(): void }>();
  private readonly models = new Set<string>();

  constructor(metrics: MetricsService) {
    this.requests = metrics.counter({
      name: 'engine_requests_total',
      help: 'Replies asked of the response engine by outcome (ok, error, timeout, cancelled), and per route the attempts retried and the routes skipped by an open circuit breaker',
      labelNames: ['engine', 'model', 'outcome'],
    });
  }

  /** The series exists from the start, so dashboards and alerts see 0 rather than nothing. */
  declare(engine: string, model: string | null): void {
    this.child(engine, model, 'ok');
  }

  count(engine: string, model: string | null, outcome: EngineOutcome): void {
    this.child(engine, model, outcome).inc();
  }

  private child(engine: string, model: string | null, outcome: EngineOutcome) {
    const label = this.modelLabel(model ?? '');
    const key = `${engine}\n${label}\n${outcome}`;
    let child = this.children.get(key);
    if (!child) {
      child = this.requests.labels({ engine, model: label, outcome });
      this.children.set(key, child);
    }
    return child;
  }

  private modelLabel(model: string): string {
    if (this.models.has(model)) return model;
    if (this.models.size >= MODEL_LABELS_MAX) return OTHER_MODEL;
    this.models.add(model);
    return model;
  }
}
