import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { nestBuild } from '../lib/build-revision';
import { cpuSeconds } from '../lib/cpu';
import { type LoadFigures, type LoadOptions, load } from '../lib/load';
import { freePort, freshDatabase, type RunningService, startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { median } from './support/stats';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const root = resolve(__dirname, '..', '..');

/**
 * - untraced: this code built without its tracing hooks (buildUntraced), METRICS_PORT=0;
 * - off: this code, METRICS_PORT=0 and no OTLP endpoint (tracing "configured off");
 * - metrics: this code with metrics on (the default), tracing off;
 * - tracing: metrics on and every request traced (always_on) to a local OTLP/HTTP receiver.
 */
type Variant = 'untraced' | 'off' | 'metrics' | 'tracing';
const VARIANTS: Variant[] = ['untraced', 'off', 'metrics', 'tracing'];
type Endpoint = 'public_get' | 'create_end_user';

interface Measurement extends LoadFigures {
  cpu_us_per_request: number;
}

/** Accepts OTLP/HTTP exports and counts them, without decoding: the bench shares the CPUs. */
class OtlpSink {
  exports = 0;
  bytes = 0;
  private constructor(private readonly server: Server) {}
  static async start(): Promise<OtlpSink> {
    const server = createServer();
    const sink = new OtlpSink(server);
    server.on('request', (request, response) => {
      request.on('data', (chunk: Buffer) => (sink.bytes += chunk.length));
      request.on('end', () => {
        sink.exports++;
        response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return sink;
  }
  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((done) => this.server.close(() => done()));
  }
}

/** Replaces `from` in a copied source file; a bench that silently changed nothing would lie. */
function rewrite(file: string, from: string | RegExp, to: string): void {
  const text = readFileSync(file, 'utf8');
  const changed = text.replace(from, to);
  if (changed === text) throw new Error(`${file}: ${String(from)} not found`);
  writeFileSync(file, changed);
}

/**
 * This checkout built without its tracing hooks, the reference for "tracing configured off": the
 * side-effect import that may start the SDK is gone from main.ts, and inClientSpan is a plain
 * call. (The log mixin is installed only when tracing is on, so it needs no change.) Comparing
 * with an older commit instead would measure every other change made since.
 */
function buildUntraced(): { main: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'bench-untraced-'));
  for (const entry of [
    'src',
    'package.json',
    'tsconfig.json',
    'tsconfig.build.json',
    'nest-cli.json',
  ]) {
    cpSync(join(root, entry), join(dir, entry), { recursive: true });
  }
  rewrite(join(dir, 'src/main.ts'), "import './tracing/register';\n", '');
  writeFileSync(
    join(dir, 'src/tracing/spans.ts'),
    [
      "import type { Attributes } from '@opentelemetry/api';",
      'export function inClientSpan<T>(_name: string, _attributes: Attributes, work: () => Promise<T>): Promise<T> {',
      '  return work();',
      '}',
      '',
    ].join('\n'),
  );
  nestBuild(dir);
  return {
    main: join(dir, 'dist', 'main.js'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * The cost of metrics and tracing on a public GET (`/v1/vocabularies/emotions/changelog`) and on
 * `POST /v1/end-users` (a new user_id per request: one write round trip): the same built service
 * per variant, one service at a time on one database, variants in rotated order over three rounds;
 * each round's ratios compare figures measured minutes apart, and the median round is reported.
 * Goals (share of the reference's requests/s): metrics on vs off ≥ 0.95; tracing every request
 * vs tracing off ≥ 0.75; tracing configured off (this code, no endpoint, metrics off) vs the same
 * code built without tracing ≥ 0.98.
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadAverage = loadavg().map((l) => Number(l.toFixed(2)));
  const untraced = buildUntraced();
  const sink = await OtlpSink.start();
  const database = await freshDatabase();
  try {
    // Migrates the fresh database and makes the tenant, so no measured start-up does.
    const first = await startService({ databaseUrl: database.url });
    const tenant = await benchTenant(first.baseUrl);
    await first.stop();

    const env = (variant: Variant): Record<string, string> => {
      switch (variant) {
        case 'untraced':
        case 'off':
          return { METRICS_PORT: '0', OTEL_EXPORTER_OTLP_ENDPOINT: '' };
        case 'metrics':
          return { OTEL_EXPORTER_OTLP_ENDPOINT: '' };
        case 'tracing':
          return { OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint, OTEL_TRACES_SAMPLER: 'always_on' };
      }
    };

    let userCounter = 0;
    const requests = (service: RunningService): Record<Endpoint, LoadOptions> => ({
      public_get: { url: `${service.baseUrl}/v1/vocabularies/emotions/changelog` },
      create_end_user: {
        url: `${service.baseUrl}/v1/end-users`,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: tenant.auth },
        requests: [
          {
            setupRequest: (request) => ({
              ...request,
              body: JSON.stringify({ user_id: `obs-${Date.now()}-${userCounter++}` }),
            }),
          },
        ],
      },
    });

    const measureVariant = async (variant: Variant) => {
      const metricsPort = await freePort();
      const service = await startService({
        databaseUrl: database.url,
        main: variant === 'untraced' ? untraced.main : undefined,
        env: { METRICS_PORT: String(metricsPort), ...env(variant) },
      });
      try {
        const scraped = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then(
          (r) => r.ok,
          () => false,
        );
        if (scraped !== (variant === 'metrics' || variant === 'tracing'))
          throw new Error(`metrics are ${scraped ? 'on' : 'off'} in variant ${variant}`);
        const exportsBefore = sink.exports;
        const figures = {} as Record<Endpoint, Measurement>;
        for (const [endpoint, options] of Object.entries(requests(service)) as Array<
          [Endpoint, LoadOptions]
        >) {
          await load({ ...options, durationSeconds: 3 });
          const cpuBefore = cpuSeconds(service.pid);
          const result = await load(options);
          const cpu = cpuSeconds(service.pid) - cpuBefore;
          if (result.errors > 0 || result.non_2xx > 0)
            throw new Error(`${variant} ${endpoint}: ${JSON.stringify(result)}`);
          figures[endpoint] = {
            ...result,
            cpu_us_per_request: Math.round((cpu * 1e6) / result.requests),
          };
        }
        if (variant === 'tracing' && sink.exports === exportsBefore)
          throw new Error('no spans reached the receiver');
        return figures;
      } finally {
        await service.stop();
      }
    };

    const rounds: Array<Record<Variant, Record<Endpoint, Measurement>>> = [];
    for (let round = 0; round < ROUNDS; round++) {
      const shift = round % VARIANTS.length;
      const order = [...VARIANTS.slice(shift), ...VARIANTS.slice(0, shift)];
      const figures = {} as Record<Variant, Record<Endpoint, Measurement>>;
      for (const variant of order) figures[variant] = await measureVariant(variant);
      rounds.push(figures);
    }

    const ratio = (
      variant: Variant,
      reference: Variant,
      endpoint: Endpoint,
      figure: 'requests_per_sec' | 'cpu_us_per_request' = 'requests_per_sec',
    ) =>
      Number(
        median(
          rounds.map((r) => r[variant][endpoint][figure] / r[reference][endpoint][figure]),
        ).toFixed(3),
      );
    const endpoints: Endpoint[] = ['public_get', 'create_end_user'];
    const summary = Object.fromEntries(
      VARIANTS.map((variant) => [
        variant,
        Object.fromEntries(
          endpoints.map((endpoint) => [
            endpoint,
            {
              requests_per_sec_median: median(
                rounds.map((r) => r[variant][endpoint].requests_per_sec),
              ),
              cpu_us_per_request_median: median(
                rounds.map((r) => r[variant][endpoint].cpu_us_per_request),
              ),
              latency_p99_ms_median: median(rounds.map((r) => r[variant][endpoint].latency_p99_ms)),
            },
          ]),
        ),
      ]),
    );
    const ratios = Object.fromEntries(
      endpoints.map((endpoint) => [
        endpoint,
        {
          metrics_on_vs_off: ratio('metrics', 'off', endpoint),
          tracing_on_vs_off: ratio('tracing', 'metrics', endpoint),
          tracing_configured_off_vs_untraced: ratio('off', 'untraced', endpoint),
          // Service CPU per request relative to the reference (1.10 = 10% more): steadier than
          // requests/s when other work shares the machine.
          cpu_metrics_on_vs_off: ratio('metrics', 'off', endpoint, 'cpu_us_per_request'),
          cpu_tracing_on_vs_off: ratio('tracing', 'metrics', endpoint, 'cpu_us_per_request'),
          cpu_tracing_configured_off_vs_untraced: ratio(
            'off',
            'untraced',
            endpoint,
            'cpu_us_per_request',
          ),
        },
      ]),
    );
    return {
      paths: {
        public_get: 'GET /v1/vocabularies/emotions/changelog',
        create_end_user: 'POST /v1/end-users',
      },
      connections: 32,
      duration_seconds: 10,
      // Other work on the machine while measuring (1-, 5-, 15-minute load averages; 2 cores).
      load_average: { at_start: loadAverage, at_end: loadavg().map((l) => Number(l.toFixed(2))) },
      rounds: ROUNDS,
      ratios,
      goals: {
        metrics_on_vs_off: 0.95,
        tracing_on_vs_off: 0.75,
        tracing_configured_off_vs_untraced: 0.98,
      },
      variants: summary,
      spans_exported_bytes: sink.bytes,
      by_round: rounds,
    };
  } finally {
    await database.drop();
    await sink.close();
    untraced.cleanup();
  }
}
