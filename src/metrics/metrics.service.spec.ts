import type { Request } from 'express';
import { PinoLogger } from 'nestjs-pino';
import pino from 'pino';
import { answersAt, freePort } from '../../test/support/ports';
import type { Database } from '../database/database';
import { MetricsService, UNMATCHED_ROUTE } from './metrics.service';

function service(metricsPort: number, metricsHost?: string) {
  const pool = { totalCount: 4, idleCount: 3, waitingCount: 1 };
  // Two budgets' pools of reads, shown as one.
  const bounded = { totalCount: 2, idleCount: 0, waitingCount: 3 };
  const database = {
    openPools: () => [
      { name: 'requests', pool },
      { name: 'bounded_reads', pool: bounded },
      { name: 'bounded_reads', pool: bounded },
    ],
  } as unknown as Database;
  return new MetricsService(
    { metricsPort, metricsHost, tracing: false },
    database,
    new PinoLogger({ pinoHttp: pino({ level: 'silent' }) }),
    'server',
  );
}

const request = (method: string, route?: string) =>
  ({ method, route: route === undefined ? undefined : { path: route } }) as unknown as Request;

async function requestsTotal(metrics: MetricsService) {
  const metric = await metrics.registry.getSingleMetric('http_requests_total')!.get();
  return metric.values.map(({ labels, value }) => ({ ...labels, value }));
}

describe('MetricsService', () => {
  it('labels a request with its route template, and requests no route matched with one label', async () => {
    const metrics = service(9464);
    const observe = metrics.responseObserver()!;
    observe(request('GET', '/v1/end-users/:user_id'), 200, 12);
    observe(request('GET', '/v1/end-users/:user_id'), 200, 8);
    observe(request('GET'), 404, 1);
    // Nest's route-independent middleware leaves its catch-all on requests it answers 404.
    observe(request('POST', '/{*path}'), 404, 1);
    expect(await requestsTotal(metrics)).toEqual([
      { method: 'GET', route: '/v1/end-users/:user_id', status: '200', value: 2 },
      { method: 'GET', route: UNMATCHED_ROUTE, status: '404', value: 1 },
      { method: 'POST', route: UNMATCHED_ROUTE, status: '404', value: 1 },
    ]);
    const text = await metrics.registry.metrics();
    expect(text).toContain(
      'http_request_duration_seconds_sum{method="GET",route="/v1/end-users/:user_id",status="200"} 0.02',
    );
  });

  it('counts a request without a duration (one the HTTP parser refused) outside the histogram', async () => {
    const metrics = service(9464);
    metrics.responseObserver()!(request('(unparsed)'), 408);
    expect(await requestsTotal(metrics)).toEqual([
      { method: '(unparsed)', route: UNMATCHED_ROUTE, status: '408', value: 1 },
    ]);
    expect(await metrics.registry.metrics()).not.toContain(
      'http_request_duration_seconds_count{method="(unparsed)"',
    );
  });

  it('reads the pools at each scrape, each by its name', async () => {
    const text = await service(9464).registry.metrics();
    expect(text).toContain('db_pool_connections{pool="requests",state="total"} 4');
    expect(text).toContain('db_pool_connections{pool="requests",state="idle"} 3');
    expect(text).toContain('db_pool_connections{pool="requests",state="waiting"} 1');
    expect(text).toContain('db_pool_connections{pool="bounded_reads",state="total"} 4');
    expect(text).toContain('db_pool_connections{pool="bounded_reads",state="waiting"} 6');
    expect(text).not.toContain('pool="async_commit"');
  });

  it('with METRICS_PORT=0 records nothing per request and collects no process metrics', async () => {
    const metrics = service(0);
    expect(metrics.enabled).toBe(false);
    expect(metrics.responseObserver()).toBeUndefined();
    expect(await metrics.registry.metrics()).not.toContain('process_cpu_user_seconds_total');
  });

  describe('METRICS_HOST', () => {
    it.each([
      ['127.0.0.1', false],
      [undefined, true],
    ])('bound to %s, answers on another address of the host: %s', async (host, elsewhere) => {
      const port = await freePort();
      const metrics = service(port, host);
      await metrics.onApplicationBootstrap();
      try {
        expect(await answersAt('127.0.0.1', port, '/metrics')).toBe(true);
        expect(await answersAt('127.0.0.2', port, '/metrics')).toBe(elsewhere);
      } finally {
        await metrics.onApplicationShutdown();
      }
    });
  });
});
