import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { FakeOpenAI } from '../../test/support/fake-openai';
import { cpuSeconds } from '../lib/cpu';
import { load, type LoadFigures } from '../lib/load';
import { type RunningService, startService } from '../lib/service';
import { benchTenant, memoryOf } from './support/data-plane';
import { load1, median, percentile, round2, sleep } from './support/stats';

const ROUNDS = 3;
const TTFB_REQUESTS = 200;
const STREAM_ORGANIZATIONS = 50;
const STREAMS_PER_ORGANIZATION = 4; // the default STREAMS_PER_ORG
const STREAM_TOKENS = 200;
const STREAM_INTERVAL_MS = 50;
const LIVE_POLL_MS = 20;
const MESSAGE = 'I am so happy today, thank you for listening!';

type Tenant = Awaited<ReturnType<typeof benchTenant>>;

let users = 0;

/**
 * 10 s of non-streamed POST /v1/respond at 32 connections, a new user_id on every request, and
 * the service's CPU time per request (less sensitive to the neighbours than requests/s).
 */
async function respondLoad(service: RunningService, tenant: Tenant, durationSeconds = 10) {
  const cpuBefore = cpuSeconds(service.pid);
  const figures = await load({
    url: `${service.baseUrl}/v1/respond`,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: tenant.auth },
    connections: 32,
    durationSeconds,
    requests: [
      {
        setupRequest: (request) => ({
          ...request,
          body: JSON.stringify({
            personality_id: tenant.personalityId,
            user_id: `bench-user-${users++}`,
            message: MESSAGE,
          }),
        }),
      },
    ],
  });
  const cpuMs = (cpuSeconds(service.pid) - cpuBefore) * 1000;
  return { ...figures, service_cpu_ms_per_request: round2(cpuMs / Math.max(1, figures.requests)) };
}

interface StreamOutcome {
  status: number;
  /** performance.now() when the first `event: delta` arrived. */
  firstDeltaAt: number | undefined;
  deltas: number;
  done: boolean;
  error: boolean;
  durationMs: number;
}

/** One streamed POST /v1/respond, read to its end on plain node:http (no buffering in between). */
function streamOnce(service: RunningService, tenant: Tenant, userId: string) {
  return new Promise<StreamOutcome>((resolve, reject) => {
    const startedAt = performance.now();
    const body = JSON.stringify({
      personality_id: tenant.personalityId,
      user_id: userId,
      message: MESSAGE,
      stream: true,
    });
    const request = httpRequest(
      `${service.baseUrl}/v1/respond`,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          authorization: tenant.auth,
        },
      },
      (response) => {
        let text = '';
        let firstDeltaAt: number | undefined;
        response.setEncoding('utf8');
        response.on('data', (piece: string) => {
          text += piece;
          if (firstDeltaAt === undefined && text.includes('event: delta')) {
            firstDeltaAt = performance.now();
          }
        });
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            firstDeltaAt,
            deltas: text.split('event: delta\n').length - 1,
            done: /event: done\ndata: [^\n]+\n\n$/.test(text),
            error: text.includes('event: error'),
            durationMs: performance.now() - startedAt,
          }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/** Figure 1: the openai engine (fake answering at once) against the local engine. */
async function throughput(local: RunningService, openai: RunningService) {
  const localTenant = await benchTenant(local.baseUrl);
  const openaiTenant = await benchTenant(openai.baseUrl);
  // Warm-up of both paths: JIT, pool connections, prepared statements, the SDK's keep-alive.
  await respondLoad(local, localTenant, 3);
  await respondLoad(openai, openaiTenant, 3);
  type Figures = LoadFigures & { service_cpu_ms_per_request: number };
  const rounds: Array<{ load_average_1m: number; local: Figures; openai: Figures }> = [];
  for (let i = 0; i < ROUNDS; i++) {
    // Alternating, so both engines see the machine's neighbours about equally.
    const localFigures = await respondLoad(local, localTenant);
    const openaiFigures = await respondLoad(openai, openaiTenant);
    rounds.push({ load_average_1m: load1(), local: localFigures, openai: openaiFigures });
  }
  const medians = (engine: 'local' | 'openai') => ({
    requests_per_sec: median(rounds.map((r) => r[engine].requests_per_sec)),
    latency_p50_ms: median(rounds.map((r) => r[engine].latency_p50_ms)),
    latency_p99_ms: median(rounds.map((r) => r[engine].latency_p99_ms)),
    service_cpu_ms_per_request: median(rounds.map((r) => r[engine].service_cpu_ms_per_request)),
    errors_and_non_2xx: rounds.reduce((sum, r) => sum + r[engine].errors + r[engine].non_2xx, 0),
  });
  const localMedian = medians('local');
  const openaiMedian = medians('openai');
  return {
    connections: 32,
    duration_seconds: 10,
    rounds: ROUNDS,
    user_ids: 'a new user_id on every request (empty history, same work for both engines)',
    fake_provider: 'answers at once, the default JSON reply echoing the message',
    local: localMedian,
    openai: openaiMedian,
    openai_to_local_rps: round2(openaiMedian.requests_per_sec / localMedian.requests_per_sec),
    per_round: rounds,
    goal: 'openai >= 0.8 of local (requests/s)',
  };
}

/** Figure 2: the service's first `event: delta` minus the provider's first content chunk. */
async function timeToFirstByte(openai: RunningService, fake: FakeOpenAI) {
  const tenant = await benchTenant(openai.baseUrl);
  // The first piece carries text, so its delta can go out at once; later ones come 20 ms apart.
  fake.respondAlwaysWith({
    content: ['{"text":"Hello', ' there,', ' my friend.', '","emotion":"joy","intensity":0.6}'],
    stream: { intervalMs: 20 },
  });
  const measure = async (count: number, prefix: string) => {
    const gaps: number[] = [];
    const fromRequest: number[] = [];
    for (let i = 0; i < count; i++) {
      const sentAt = performance.now();
      const outcome = await streamOnce(openai, tenant, `${prefix}-${i}`);
      const providerAt = fake.lastRequest().firstContentAt;
      if (outcome.status !== 200 || !outcome.done || !outcome.firstDeltaAt || !providerAt) {
        throw new Error(`stream ${i}: ${JSON.stringify(outcome)}`);
      }
      gaps.push(outcome.firstDeltaAt - providerAt);
      fromRequest.push(outcome.firstDeltaAt - sentAt);
    }
    return { gaps, fromRequest };
  };
  await measure(20, 'ttfb-warm');
  const loadBefore = load1();
  const { gaps, fromRequest } = await measure(TTFB_REQUESTS, 'ttfb');
  fake.reset();
  return {
    streamed_requests: TTFB_REQUESTS,
    sequential: true,
    fake_provider: 'role chunk and first content chunk at once, then a chunk every 20 ms',
    clock: 'performance.now() of the bench process, which runs both the fake and the client',
    service_first_delta_minus_provider_first_chunk_ms: {
      p50: round2(percentile(gaps, 50)),
      p90: round2(percentile(gaps, 90)),
      p99: round2(percentile(gaps, 99)),
      max: round2(Math.max(...gaps)),
    },
    request_sent_to_first_delta_ms: {
      p50: round2(percentile(fromRequest, 50)),
      p99: round2(percentile(fromRequest, 99)),
    },
    load_average_1m: [loadBefore, load1()],
    goal: 'p50 < 5 ms',
  };
}

/** Polls GET /health/live every 20 ms until `stop` resolves; returns the latencies. */
async function pollLive(service: RunningService, stop: { stopped: boolean }): Promise<number[]> {
  const latencies: number[] = [];
  while (!stop.stopped) {
    const startedAt = performance.now();
    const response = await fetch(`${service.baseUrl}/health/live`);
    await response.arrayBuffer();
    const took = performance.now() - startedAt;
    latencies.push(took);
    await sleep(Math.max(0, LIVE_POLL_MS - took));
  }
  return latencies;
}

const liveFigures = (latencies: number[]) => ({
  polls: latencies.length,
  p50_ms: round2(percentile(latencies, 50)),
  p99_ms: round2(percentile(latencies, 99)),
  max_ms: round2(Math.max(...latencies)),
});

/** The service's event-loop delay samples (bench/lib/loop-delay-preload.js) of a time window. */
function loopDelayIn(file: string, fromMs: number, toMs: number) {
  const samples = readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { at: number; lag_ms: number[] })
    // Each line holds the second before its `at`.
    .filter((line) => line.at > fromMs + 1000 && line.at <= toMs)
    .flatMap((line) => line.lag_ms);
  return {
    samples: samples.length,
    p50_ms: round2(percentile(samples, 50)),
    p99_ms: round2(percentile(samples, 99)),
    max_ms: round2(Math.max(...samples)),
  };
}

/** Figure 3: 200 concurrent streams of a token every 50 ms for 10 s. */
async function concurrentStreams(openai: RunningService, fake: FakeOpenAI, loopFile: string) {
  const atStart = memoryOf(openai.pid);
  const tenants: Tenant[] = [];
  for (let i = 0; i < STREAM_ORGANIZATIONS; i++) tenants.push(await benchTenant(openai.baseUrl));
  const afterSignUps = memoryOf(openai.pid);
  const text = Array.from({ length: STREAM_TOKENS }, (_, i) => `token${i}`).join(' ');

  // Warm-up of the streaming path at this concurrency, with short streams.
  fake.respondAlwaysWith({ content: { text, emotion: 'joy', intensity: 0.6 } });
  await Promise.all(tenants.map((tenant, i) => streamOnce(openai, tenant, `warm-${i}`)));

  fake.respondAlwaysWith({
    content: { text, emotion: 'joy', intensity: 0.6 },
    stream: { chunks: STREAM_TOKENS, intervalMs: STREAM_INTERVAL_MS },
  });
  const idleStart = Date.now();
  const idle = liveFigures(await pollFor(openai, 3000));
  const idleEnd = Date.now();
  await sleep(500);
  const before = memoryOf(openai.pid);
  const loadBefore = load1();

  const benchLoop = monitorEventLoopDelay({ resolution: 10 });
  benchLoop.enable();
  const stop = { stopped: false };
  const polling = pollLive(openai, stop);
  const windowStart = Date.now();
  const cpuBefore = cpuSeconds(openai.pid);
  let peakRss = before.rss_mib;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, memoryOf(openai.pid).rss_mib);
  }, 100);
  const startedAt = performance.now();
  const outcomes = await Promise.all(
    tenants.flatMap((tenant, t) =>
      Array.from({ length: STREAMS_PER_ORGANIZATION }, (_, s) =>
        streamOnce(openai, tenant, `stream-${t}-${s}`),
      ),
    ),
  );
  const wallMs = performance.now() - startedAt;
  const windowEnd = Date.now();
  const serviceCpuSeconds = cpuSeconds(openai.pid) - cpuBefore;
  clearInterval(sampler);
  stop.stopped = true;
  const during = liveFigures(await polling);
  benchLoop.disable();
  const after = memoryOf(openai.pid);
  fake.reset();
  await sleep(1100); // the preload's last second of the window reaches its file
  const serviceLoop = loopDelayIn(loopFile, windowStart, windowEnd);
  const idleLoop = loopDelayIn(loopFile, idleStart, idleEnd);

  const durations = outcomes.map((o) => o.durationMs);
  const statuses: Record<string, number> = {};
  for (const o of outcomes) statuses[o.status] = (statuses[o.status] ?? 0) + 1;
  return {
    streams: outcomes.length,
    organizations: STREAM_ORGANIZATIONS,
    streams_per_organization: STREAMS_PER_ORGANIZATION,
    fake_provider: `${STREAM_TOKENS} chunks, one every ${STREAM_INTERVAL_MS} ms`,
    statuses,
    complete_with_done: outcomes.filter((o) => o.done && !o.error).length,
    with_error_event: outcomes.filter((o) => o.error).length,
    deltas_per_stream: { min: Math.min(...outcomes.map((o) => o.deltas)) },
    stream_duration_ms: {
      p50: Math.round(percentile(durations, 50)),
      max: Math.round(Math.max(...durations)),
    },
    wall_ms: Math.round(wallMs),
    service_rss_mib: {
      fresh_service: round2(atStart.rss_mib),
      after_50_sign_ups: round2(afterSignUps.rss_mib),
      before_after_warm_up: round2(before.rss_mib),
      peak_during: round2(peakRss),
      after: round2(after.rss_mib),
      growth_to_peak: round2(peakRss - before.rss_mib),
    },
    service_event_loop_delay: {
      method:
        'lateness of a 10 ms timer inside the service (bench/lib/loop-delay-preload.js, preloaded with NODE_OPTIONS; main has no metrics endpoint), whole seconds within the streams',
      during: serviceLoop,
      idle_before: idleLoop,
    },
    service_cpu_cores_during: round2(serviceCpuSeconds / (wallMs / 1000)),
    health_live_latency_proxy: {
      method:
        'GET /health/live polled every 20 ms from the bench process, which also runs the fake and the 200 clients: a proxy that includes the bench process own delays',
      idle_before: idle,
      during,
      bench_process_loop_delay_p99_ms: round2(benchLoop.percentile(99) / 1e6),
    },
    load_average_1m: [loadBefore, load1()],
    goals: {
      rss_growth: '< 64 MiB',
      event_loop_delay_p99: '< 20 ms',
      streams: 'every stream complete (ends with event: done)',
    },
  };
}

async function pollFor(service: RunningService, ms: number): Promise<number[]> {
  const stop = { stopped: false };
  const polling = pollLive(service, stop);
  await sleep(ms);
  stop.stopped = true;
  return polling;
}

/**
 * RESPONSE_ENGINE=openai against a fake OpenAI-compatible server in this process: non-streamed
 * throughput beside the local engine, a stream's added time to first byte, and 200 concurrent
 * streams (memory, event-loop delay, completeness).
 */
export async function run(): Promise<Record<string, unknown>> {
  const fake = await FakeOpenAI.start();
  const loadAtStart = loadavg().map(round2);
  let local: RunningService | undefined;
  let openai: RunningService | undefined;
  const openaiEnv = {
    RESPONSE_ENGINE: 'openai',
    OPENAI_BASE_URL: fake.url,
    OPENAI_API_KEY: 'bench-key',
    OPENAI_MODEL: 'gpt-bench',
    ENGINE_TIMEOUT_MS: '30000',
  };
  try {
    local = await startService();
    openai = await startService({ env: openaiEnv });
    const nonStreamed = await throughput(local, openai);
    await local.stop();
    local = undefined;
    const ttfb = await timeToFirstByte(openai, fake);
    await openai.stop();
    openai = undefined;
    // A service of its own for the streams, so its memory is not that of the load above.
    const loopFile = join(tmpdir(), `bench-loop-delay-${process.pid}.jsonl`);
    openai = await startService({
      env: {
        ...openaiEnv,
        NODE_OPTIONS: `--require ${resolve(__dirname, '../lib/loop-delay-preload.js')}`,
        LOOP_DELAY_FILE: loopFile,
      },
    });
    const streams = await concurrentStreams(openai, fake, loopFile);
    return {
      load_average_at_start: loadAtStart,
      load_average_at_end: loadavg().map(round2),
      non_streamed: nonStreamed,
      time_to_first_byte: ttfb,
      concurrent_streams: streams,
    };
  } finally {
    await local?.stop();
    await openai?.stop();
    await fake.close();
  }
}
