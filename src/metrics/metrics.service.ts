import {
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { Request } from 'express';
import { createServer, type Server } from 'node:http';
import {
  collectDefaultMetrics,
  Counter,
  Gauge,
  Histogram,
  Registry,
  type CounterConfiguration,
  type GaugeConfiguration,
  type HistogramConfiguration,
} from 'prom-client';
import { routeTemplateOf } from '../common/http/route-template';
import type { ResponseObserver } from '../common/logging/http-logger';
import { PinoLogger } from 'nestjs-pino';
import { type TelemetryConfig, telemetryConfig } from '../config/telemetry.config';
import { Database } from '../database/database';
import { PROCESS_ROLE, type ProcessRole } from '../common/time/background-jobs';

/** The `route` of requests no route matched (unknown paths, bodies refused before routing). */
export const UNMATCHED_ROUTE = 'unmatched';

/** Seconds; from a cached public read (~1 ms) to the slowest writes and provider calls. */
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface HttpSeries {
  requests: { inc(): void };
  duration: { observe(value: number): void };
}

/**
 * The process's Prometheus registry and its server on METRICS_PORT (never the public port).
 * Owns the HTTP (RED), database pool and default process metrics; feature modules register their
 * own with `counter()` / `gauge()` and record into them, keeping the labelled children they use
 * (prom-client hashes the label values on every `labels()` call).
 */
@Injectable()
export class MetricsService implements OnApplicationBootstrap, OnApplicationShutdown {
  readonly registry = new Registry();
  private readonly port: number;
  /** METRICS_HOST; undefined: every interface. */
  private readonly host: string | undefined;
  private server: Server | undefined;
  private readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  private readonly httpSeries = new Map<string, HttpSeries>();

  constructor(
    @Inject(telemetryConfig.KEY) telemetry: TelemetryConfig,
    database: Database,
    private readonly logger: PinoLogger,
    @Inject(PROCESS_ROLE) private readonly role: ProcessRole,
  ) {
    this.port = telemetry.metricsPort;
    this.host = telemetry.metricsHost;
    if (this.enabled) collectDefaultMetrics({ register: this.registry });

    this.httpRequests = this.counter({
      name: 'http_requests_total',
      help: 'HTTP requests answered, by method, route template and status',
      labelNames: ['method', 'route', 'status'],
    });
    this.httpDuration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time from the first byte of a request to the end of its response',
      labelNames: ['method', 'route', 'status'],
      buckets: DURATION_BUCKETS,
      registers: [this.registry],
    });

    this.gauge({
      name: 'db_pool_connections',
      help: 'PostgreSQL pool connections, by pool: total open, idle, and requests waiting for one',
      labelNames: ['pool', 'state'],
      collect() {
        // Summed per name: reads under two time budgets would have two pools.
        const counts = new Map<string, { total: number; idle: number; waiting: number }>();
        for (const { name, pool } of database.openPools()) {
          const sum = counts.get(name) ?? { total: 0, idle: 0, waiting: 0 };
          sum.total += pool.totalCount;
          sum.idle += pool.idleCount;
          sum.waiting += pool.waitingCount;
          counts.set(name, sum);
        }
        for (const [name, sum] of counts) {
          this.set({ pool: name, state: 'total' }, sum.total);
          this.set({ pool: name, state: 'idle' }, sum.idle);
          this.set({ pool: name, state: 'waiting' }, sum.waiting);
        }
      },
    });
  }

  /** METRICS_PORT=0 turns metrics off: no server, no default metrics, no per-request work. */
  get enabled(): boolean {
    return this.port !== 0;
  }

  counter<L extends string>(configuration: CounterConfiguration<L>): Counter<L> {
    return new Counter({ ...configuration, registers: [this.registry] });
  }

  /** A `collect` function runs at each scrape (it may be async: read the number then). */
  gauge<L extends string>(configuration: GaugeConfiguration<L>): Gauge<L> {
    return new Gauge({ ...configuration, registers: [this.registry] });
  }

  histogram<L extends string>(configuration: HistogramConfiguration<L>): Histogram<L> {
    return new Histogram({ ...configuration, registers: [this.registry] });
  }

  /** Records each finished request (installed by app.setup.ts); undefined when metrics are off. */
  responseObserver(): ResponseObserver | undefined {
    if (!this.enabled) return undefined;
    return (request: Pick<Request, 'method'>, status: number, durationMs?: number) => {
      // Never the raw path, so ids cannot become label values; the HTTP parser accepts a fixed
      // set of methods (a request it refused is UNPARSED_METHOD).
      const template = routeTemplateOf(request) ?? UNMATCHED_ROUTE;
      const key = `${request.method} ${status} ${template}`;
      let series = this.httpSeries.get(key);
      if (!series) {
        const labels = { method: request.method, route: template, status: String(status) };
        series = {
          requests: this.httpRequests.labels(labels),
          duration: this.httpDuration.labels(labels),
        };
        this.httpSeries.set(key, series);
      }
      series.requests.inc();
      if (durationMs !== undefined) series.duration.observe(durationMs / 1000);
    };
  }

  async onApplicationBootstrap(): Promise<void> {
    // A command of the CLI serves no metrics: it would take the running server's port.
    if (!this.enabled || this.role !== 'server') return;
    const server = createServer((request, response) => {
      if (request.method !== 'GET' || request.url?.split('?')[0] !== '/metrics') {
        response.writeHead(404, { 'content-type': 'text/plain' }).end('Not found\n');
        return;
      }
      this.registry.metrics().then(
        (text) => response.writeHead(200, { 'content-type': this.registry.contentType }).end(text),
        (error: unknown) => {
          this.logger.error({ err: error }, 'metrics collection failed');
          response.writeHead(500, { 'content-type': 'text/plain' }).end('Collection failed\n');
        },
      );
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, this.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', (error) => this.logger.error({ err: error }, 'metrics server error'));
    this.server = server;
    this.logger.info(
      { port: this.port, host: this.host ?? 'every interface' },
      'metrics listening',
    );
  }

  /** Last of all at shutdown, so the final state of a draining instance can still be scraped. */
  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}
