import { existsSync, readFileSync, unlinkSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import { FakeOpenAI } from '../../test/support/fake-openai';
import { cpuSeconds } from '../lib/cpu';
import { type RunningService, startService } from '../lib/service';
import { personalityReply, random, userMessage } from './support/chat-text';
import { benchTenant, memoryOf } from './support/data-plane';
import { loadAverages, round2, sleep } from './support/stats';
import { StreamingProvider } from './support/streaming-provider';

const STREAMS = 20;
const PER_ORGANIZATION = 4; // STREAMS_PER_ORG's default: 5 organizations hold the 20 streams
const REPLY_BYTES = 8 * 1024 * 1024;
const EXPORT_MEMORIES = 20_000;
const SEED = 20_260_815;
const GOAL_MIB_PER_STREAM = 2;
/**
 * ENGINE_TIMEOUT_MS and STREAM_IDLE_TIMEOUT_MS (30 s by default) raised for the streamed replies:
 * 20 streams of token-sized deltas take the service longer than 30 s to fill every buffer on the
 * way, and the figure is the memory of streams that have stalled, not of streams cut short.
 */
const STREAM_TIMEOUT_MS = 180_000;
const SETTLE_DEADLINE_MS = 150_000;

type Tenant = Awaited<ReturnType<typeof benchTenant>>;

let services = 0;

/**
 * A service with bench/lib/gc-on-signal-preload.js: `retained()` runs a full garbage collection
 * in it and answers what it then holds (MiB): the JavaScript heap in use, and `external` (Buffers
 * and other memory outside the heap that objects hold). RSS counts garbage not yet collected;
 * these do not.
 */
async function serviceWithGc(env: Record<string, string> = {}) {
  const file = join(tmpdir(), `bench-gc-${process.pid}-${services++}.json`);
  const service = await startService({
    env: {
      ...env,
      NODE_OPTIONS: `--expose-gc --require ${resolve(__dirname, '../lib/gc-on-signal-preload.js')}`,
      GC_REPORT_FILE: file,
    },
  });
  const retained = async () => {
    if (existsSync(file)) unlinkSync(file);
    process.kill(service.pid, 'SIGUSR2');
    for (let i = 0; i < 1200 && !existsSync(file); i++) await sleep(50);
    const usage = JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;
    unlinkSync(file);
    const mib = (bytes: number) => bytes / 1024 / 1024;
    return { heap_used: mib(usage.heapUsed), external: mib(usage.external) };
  };
  return { service, retained };
}

function retainedGrowth(
  before: { heap_used: number; external: number },
  after: { heap_used: number; external: number },
  count: number,
) {
  return {
    before_mib: { heap_used: round2(before.heap_used), external: round2(before.external) },
    stalled_mib: { heap_used: round2(after.heap_used), external: round2(after.external) },
    growth_per_stream_mib: round2(
      (after.heap_used + after.external - before.heap_used - before.external) / count,
    ),
  };
}

const openaiEnv = (url: string) => ({
  RESPONSE_ENGINE: 'openai',
  OPENAI_BASE_URL: url,
  OPENAI_API_KEY: 'bench-key',
  OPENAI_MODEL: 'gpt-bench',
});

/** The model's whole answer: a JSON object whose `text` is about `bytes` of chat. */
function answerOf(bytes: number): string {
  const next = random(SEED);
  const sentences: string[] = [];
  let length = 0;
  while (length < bytes) {
    const sentence = personalityReply(next);
    sentences.push(sentence);
    length += sentence.length + 1;
  }
  return JSON.stringify({
    text: sentences.join(' '),
    emotion: 'caring',
    intensity: 0.5,
    facts: [],
  });
}

/**
 * An HTTP/1.1 request written on a raw socket that is never read: Node stops taking bytes from
 * the kernel once the socket's own 16 KiB buffer is full, then the kernel's receive buffer fills,
 * then the service's writes stop.
 */
function nonReadingClient(
  service: RunningService,
  method: string,
  path: string,
  auth: string,
  body?: string,
): Socket {
  const url = new URL(service.baseUrl);
  const socket = connect(Number(url.port), url.hostname);
  socket.pause();
  socket.on('error', () => undefined);
  const headers = [
    `${method} ${path} HTTP/1.1`,
    `Host: ${url.host}`,
    `Authorization: ${auth}`,
    ...(body === undefined
      ? []
      : ['Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`]),
    '',
    '',
  ].join('\r\n');
  socket.write(body === undefined ? headers : headers + body);
  return socket;
}

/**
 * Samples the service's RSS and CPU time every 250 ms until the streams have stalled: `ready()`
 * (every stream has begun), the service used less than 2% of a core and its RSS moved less than
 * 0.5 MiB over the last 2 s; or until `deadlineMs`. RSS alone can look flat for seconds while a
 * busy service is still reading; an idle process is not. Answers the last sample and when.
 */
async function untilSettled(pid: number, deadlineMs: number, ready: () => boolean = () => true) {
  const startedAt = performance.now();
  const samples: Array<{ rss: number; cpu: number }> = [];
  const everySecond: number[] = [];
  let peak = 0;
  for (;;) {
    await sleep(250);
    const rss = memoryOf(pid).rss_mib;
    peak = Math.max(peak, rss);
    samples.push({ rss, cpu: cpuSeconds(pid) });
    if (samples.length % 4 === 0) everySecond.push(Math.round(rss));
    const window = samples.slice(-9);
    const elapsed = performance.now() - startedAt;
    const rssValues = window.map((sample) => sample.rss);
    if (
      window.length === 9 &&
      ready() &&
      window[8].cpu - window[0].cpu < 0.04 &&
      Math.max(...rssValues) - Math.min(...rssValues) < 0.5
    ) {
      return { rss, peak, settled: true, after_seconds: round2(elapsed / 1000), everySecond };
    }
    if (elapsed > deadlineMs) {
      return { rss, peak, settled: false, after_seconds: round2(elapsed / 1000), everySecond };
    }
  }
}

async function settleBaseline(pid: number) {
  await sleep(3000);
  return (await untilSettled(pid, 10_000)).rss;
}

/**
 * STREAMS streamed /v1/respond calls whose clients read nothing, against a provider streaming an
 * answer of REPLY_BYTES: the service's RSS before and once the streams have stalled, per stream.
 */
export async function stalledStreams(
  kind:
    | 'fake-provider-2-KiB-pieces'
    | 'token-sized-4-character-pieces'
    | 'token-sized-answer-of-1024-tokens',
) {
  // ENGINE_MAX_TOKENS's default is 1,024 tokens, about 4 KiB of English: what a provider that
  // honours max_completion_tokens sends at most. The 8 MiB answers are a provider that does not.
  const answer = answerOf(kind === 'token-sized-answer-of-1024-tokens' ? 4096 : REPLY_BYTES);
  let fake: FakeOpenAI | undefined;
  let provider: StreamingProvider | undefined;
  let url: string;
  if (kind === 'fake-provider-2-KiB-pieces') {
    fake = await FakeOpenAI.start();
    const pieces: string[] = [];
    for (let at = 0; at < answer.length; at += 2048) pieces.push(answer.slice(at, at + 2048));
    fake.respondAlwaysWith({ content: pieces, stream: {} });
    url = fake.url;
  } else {
    provider = await StreamingProvider.start(answer, 4);
    url = provider.url;
  }
  const requests = () => fake?.requests.length ?? provider!.written.length;
  const { service, retained } = await serviceWithGc({
    ...openaiEnv(url),
    ENGINE_TIMEOUT_MS: String(STREAM_TIMEOUT_MS),
    STREAM_IDLE_TIMEOUT_MS: String(STREAM_TIMEOUT_MS),
  });
  const sockets: Socket[] = [];
  try {
    const tenants: Tenant[] = [];
    for (let i = 0; i < STREAMS / PER_ORGANIZATION; i++)
      tenants.push(await benchTenant(service.baseUrl));
    const atStart = memoryOf(service.pid).rss_mib;
    const body = (tenant: Tenant, userId: string) =>
      JSON.stringify({
        personality_id: tenant.personalityId,
        user_id: userId,
        message: 'Tell me a long story.',
        stream: true,
      });

    // Warm-up: two streams read for two seconds then dropped (their slots come back).
    for (let i = 0; i < 2; i++) {
      const controller = new AbortController();
      const response = await fetch(`${service.baseUrl}/v1/respond`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: tenants[i].auth },
        body: body(tenants[i], `warm-${i}`),
        signal: controller.signal,
      });
      const reader = response.body!.getReader();
      const until = performance.now() + 2000;
      while (performance.now() < until) if ((await reader.read()).done) break;
      controller.abort();
    }
    const before = await settleBaseline(service.pid);
    const retainedBefore = await retained();
    const requestsBefore = requests();

    const openedAt = performance.now();
    tenants.forEach((tenant, t) => {
      for (let s = 0; s < PER_ORGANIZATION; s++) {
        sockets.push(
          nonReadingClient(
            service,
            'POST',
            '/v1/respond',
            tenant.auth,
            body(tenant, `stalled-${t}-${s}`),
          ),
        );
      }
    });
    const stalled = await untilSettled(
      service.pid,
      SETTLE_DEADLINE_MS,
      () => requests() - requestsBefore >= STREAMS,
    );
    const streamsReachedProvider = requests() - requestsBefore;
    await sleep(3000);
    const later = memoryOf(service.pid).rss_mib;
    const secondsOpen = round2((performance.now() - openedAt) / 1000);
    const providerCharacters = provider ? provider.total : undefined;
    const retainedStalled = await retained();

    for (const socket of sockets) socket.destroy();
    await sleep(3000);
    const released = memoryOf(service.pid).rss_mib;
    const perStream = (stalled.rss - before) / STREAMS;
    return {
      provider: kind,
      answer_bytes: answer.length,
      streams: STREAMS,
      streams_that_reached_the_provider: streamsReachedProvider,
      service_rss_mib: {
        fresh_service: round2(atStart),
        before: round2(before),
        stalled: round2(stalled.rss),
        stalled_plus_3_s: round2(later),
        peak_while_filling: round2(stalled.peak),
        three_seconds_after_the_clients_closed: round2(released),
      },
      settled: stalled.settled,
      settled_after_seconds: stalled.after_seconds,
      rss_mib_every_second_while_filling: stalled.everySecond,
      streams_open_seconds_when_measured: secondsOpen,
      ...(providerCharacters === undefined
        ? {}
        : {
            answer_characters_the_provider_sent_per_stream: Math.round(
              providerCharacters / STREAMS,
            ),
          }),
      rss_growth_per_stream_mib: round2(perStream),
      peak_growth_per_stream_mib: round2((stalled.peak - before) / STREAMS),
      after_a_full_gc: retainedGrowth(retainedBefore, retainedStalled, STREAMS),
      goal: `<= ${GOAL_MIB_PER_STREAM} MiB per stream`,
      goal_met: perStream <= GOAL_MIB_PER_STREAM,
    };
  } finally {
    for (const socket of sockets) socket.destroy();
    await service.stop();
    await fake?.close();
    await provider?.close();
  }
}

/** Exports of an end user of EXPORT_MEMORIES memories to clients that read nothing. */
async function stalledExports() {
  const { service, retained } = await serviceWithGc();
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  const sockets: Socket[] = [];
  try {
    const tenant = await benchTenant(service.baseUrl);
    const userId = 'bench-large-export';
    await db.query(`INSERT INTO end_users (organization_id, user_id) VALUES ($1, $2)`, [
      tenant.organizationId,
      userId,
    ]);
    const next = random(SEED + 1);
    const contents = Array.from({ length: EXPORT_MEMORIES }, (_, i) =>
      i % 2 === 0 ? userMessage(next) : personalityReply(next),
    );
    for (let at = 0; at < contents.length; at += 2_000) {
      await db.query(
        `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content, emotion,
                               intensity, vocabulary_version, created_at, search)
         SELECT $1, e.id, $2, CASE WHEN (n + $4::int) % 2 = 1 THEN 'user' ELSE 'personality' END, c,
                'neutral', 0.5, '2.0.0', now() - make_interval(mins => $5::int - n::int - $4::int),
                to_tsvector('english', c)
           FROM end_users e, unnest($3::text[]) WITH ORDINALITY AS u(c, n)
          WHERE e.organization_id = $1 AND e.user_id = $6`,
        [
          tenant.organizationId,
          tenant.personalityId,
          contents.slice(at, at + 2_000),
          at,
          EXPORT_MEMORIES,
          userId,
        ],
      );
    }
    const path = `/v1/end-users/${userId}/export`;
    // Warm-up, and the document's size: one export read to its end.
    const warm = await fetch(`${service.baseUrl}${path}`, {
      headers: { authorization: tenant.auth },
    });
    const documentBytes = (await warm.arrayBuffer()).byteLength;

    const measure = async (count: number) => {
      const before = await settleBaseline(service.pid);
      const retainedBefore = await retained();
      const opened: Socket[] = [];
      for (let i = 0; i < count; i++)
        opened.push(nonReadingClient(service, 'GET', path, tenant.auth));
      sockets.push(...opened);
      const stalled = await untilSettled(service.pid, 20_000);
      const retainedStalled = await retained();
      for (const socket of opened) socket.destroy();
      await sleep(2000);
      const released = memoryOf(service.pid).rss_mib;
      return {
        exports: count,
        service_rss_mib: {
          before: round2(before),
          stalled: round2(stalled.rss),
          peak: round2(stalled.peak),
          after_the_clients_closed: round2(released),
        },
        settled: stalled.settled,
        settled_after_seconds: stalled.after_seconds,
        rss_growth_per_export_mib: round2((stalled.rss - before) / count),
        after_a_full_gc: retainedGrowth(retainedBefore, retainedStalled, count),
        goal_met: (stalled.rss - before) / count <= GOAL_MIB_PER_STREAM,
      };
    };
    return {
      memories: EXPORT_MEMORIES,
      document_bytes: documentBytes,
      one_export: await measure(1),
      four_exports_at_once: await measure(PER_ORGANIZATION),
      goal: `<= ${GOAL_MIB_PER_STREAM} MiB per export`,
    };
  } finally {
    for (const socket of sockets) socket.destroy();
    await db.end();
    await service.stop();
  }
}

/**
 * Clients that stop reading (contract §25): 20 streamed /v1/respond calls (5 organizations × 4,
 * STREAMS_PER_ORG's default) against a provider streaming an answer of 8 MiB, to raw sockets that
 * never read; the service's RSS (/proc/<pid>/status) before and once they have stalled, divided
 * by 20 (goal <= 2 MiB per stream). Two providers: the fake of the specs, in 2 KiB pieces, and
 * one streaming token-sized (4-character) pieces as fast as the service takes them; and, as a
 * provider honouring max_completion_tokens sends at most, an answer of 1,024 tokens in 4-character
 * pieces. Then exports of an end user of 20,000 memories to clients that read nothing.
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const large = await stalledStreams('fake-provider-2-KiB-pieces');
  const small = await stalledStreams('token-sized-4-character-pieces');
  const bounded = await stalledStreams('token-sized-answer-of-1024-tokens');
  const exports = await stalledExports();
  return {
    load_average_at_start: loadAtStart,
    load_average_at_end: loadAverages(),
    machine_note:
      "a shared machine (2 cores, other work beside the bench); RSS is the service process's VmRSS: what it holds, garbage not yet collected included",
    method:
      'a fresh service per part; RSS sampled every 250 ms from /proc/<pid>/status, "stalled" when every stream had begun (reached the provider) and, over the last 2 s, the service used less than 2% of a core and its RSS moved less than 0.5 MiB; growth = stalled minus the settled RSS before the clients connected. Beside it, after_a_full_gc: the heap in use plus external memory (Buffers) after a full collection in the service (bench/lib/gc-on-signal-preload.js, SIGUSR2), before and once stalled: what the streams retain, without the garbage RSS also counts. For the streamed replies ENGINE_TIMEOUT_MS and STREAM_IDLE_TIMEOUT_MS are raised to 180 s so that 20 streams of token-sized deltas fill every buffer before anything ends them; the exports run with the defaults (30 s), measured within them',
    kernel_tcp_buffers: {
      note: "a client that reads nothing still takes what the kernel buffers for it (its receive buffer, autotuned up to tcp_rmem's maximum, and the service's send buffer): the service streams that much before its writes stop, and the reply's text received so far stays in the service's heap until the reply ends",
      tcp_rmem: readFileSync('/proc/sys/net/ipv4/tcp_rmem', 'utf8').trim(),
      tcp_wmem: readFileSync('/proc/sys/net/ipv4/tcp_wmem', 'utf8').trim(),
    },
    streamed_replies: {
      answer_of_8_MiB_in_2_KiB_pieces: large,
      answer_of_8_MiB_in_4_character_pieces: small,
      answer_of_1024_tokens_in_4_character_pieces: bounded,
    },
    exports,
  };
}
