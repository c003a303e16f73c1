import { request as httpRequest } from 'node:http';
import { FakeOpenAI, type RecordedChatRequest } from '../../test/support/fake-openai';
import { cpuSeconds } from '../lib/cpu';
import { load, type LoadFigures } from '../lib/load';
import { type RunningService, startService } from '../lib/service';
import { random, userMessage } from './support/chat-text';
import { REPLIES } from './support/companion-replies';
import { benchTenant } from './support/data-plane';
import { backendCpu, cpuBetween } from './support/db-cpu';
import { load1, loadAverages, median, percentile, round2, round3 } from './support/stats';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const PAIRS = Number(process.env.BENCH_PAIRS ?? 100);
const PAIRS_AT_ONCE = 4; // 4 streams per organization at once: STREAMS_PER_ORG's default
const CHUNK_CHARACTERS = 4;
const CHUNK_INTERVAL_MS = 20;
const SEED = 20_260_722;

type Tenant = Awaited<ReturnType<typeof benchTenant>>;

/** The first sentence as the gate cuts it: through the terminator and the space after it. */
const firstSentence = (text: string) => /^.*?[.!?]+\s/.exec(text)?.[0] ?? text;

async function patchSafety(service: RunningService, tenant: Tenant, body: unknown) {
  const response = await fetch(
    `${service.baseUrl}/v1/organizations/${tenant.organizationId}/safety`,
    {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', authorization: tenant.ownerAuth },
      body: JSON.stringify(body),
    },
  );
  if (response.status !== 200) {
    throw new Error(`PATCH safety: ${response.status} ${await response.text()}`);
  }
  return (await response.json()) as Record<string, unknown>;
}

type Measured = LoadFigures & { service_cpu_ms_per_request: number; db_cpu_ms_per_request: number };

/** 10 s of non-streamed POST /v1/respond at 32 connections, 1,000 end users in turn. */
async function respondLoad(
  service: RunningService,
  tenant: Tenant,
  messages: string[],
  durationSeconds = 10,
): Promise<Measured> {
  let turn = 0;
  const serviceBefore = cpuSeconds(service.pid);
  const dbBefore = await backendCpu(service.databaseUrl);
  const figures = await load({
    url: `${service.baseUrl}/v1/respond`,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: tenant.auth },
    connections: 32,
    durationSeconds,
    requests: [
      {
        setupRequest: (request) => {
          const n = turn++;
          return {
            ...request,
            body: JSON.stringify({
              personality_id: tenant.personalityId,
              user_id: `safety-talker-${n % 1000}`,
              message: messages[n % messages.length],
            }),
          };
        },
      },
    ],
  });
  const serviceSeconds = cpuSeconds(service.pid) - serviceBefore;
  const dbSeconds = cpuBetween(dbBefore, await backendCpu(service.databaseUrl));
  const perRequest = (seconds: number) => round3((seconds * 1000) / Math.max(1, figures.requests));
  return {
    ...figures,
    service_cpu_ms_per_request: perRequest(serviceSeconds),
    db_cpu_ms_per_request: perRequest(dbSeconds),
  };
}

/** Figure 1: the local engine's replies with safety at its defaults and with every setting off. */
async function throughput(messages: string[]) {
  const service = await startService();
  try {
    const on = await benchTenant(service.baseUrl);
    const off = await benchTenant(service.baseUrl);
    const settingsOff = await patchSafety(service, off, {
      crisis_response: 'off',
      input_moderation: 'off',
      output_moderation: 'off',
    });
    // Warm-up of both paths: JIT, pool connections, prepared statements, the settings caches.
    await respondLoad(service, on, messages, 3);
    await respondLoad(service, off, messages, 3);
    const rounds: Array<{ load_average_1m: number; on: Measured; off: Measured }> = [];
    for (let i = 0; i < ROUNDS; i++) {
      const round = {} as { on: Measured; off: Measured };
      // Alternating which goes first, so neither always follows the other.
      if (i % 2 === 0) {
        round.on = await respondLoad(service, on, messages);
        round.off = await respondLoad(service, off, messages);
      } else {
        round.off = await respondLoad(service, off, messages);
        round.on = await respondLoad(service, on, messages);
      }
      rounds.push({ load_average_1m: load1(), ...round });
    }
    const medians = (variant: 'on' | 'off') => ({
      requests_per_sec: median(rounds.map((r) => r[variant].requests_per_sec)),
      latency_p50_ms: median(rounds.map((r) => r[variant].latency_p50_ms)),
      latency_p99_ms: median(rounds.map((r) => r[variant].latency_p99_ms)),
      service_cpu_ms_per_request: median(rounds.map((r) => r[variant].service_cpu_ms_per_request)),
      db_cpu_ms_per_request: median(rounds.map((r) => r[variant].db_cpu_ms_per_request)),
      errors_and_non_2xx: rounds.reduce(
        (sum, r) => sum + r[variant].errors + r[variant].non_2xx,
        0,
      ),
    });
    const onMedian = medians('on');
    const offMedian = medians('off');
    const ratio = round3(onMedian.requests_per_sec / offMedian.requests_per_sec);
    return {
      method: `one service (local engine, local classifier), two organizations: safety at its defaults (crisis_response on, input_moderation flag, output_moderation block) and every setting off (${JSON.stringify(settingsOff)}); non-streamed POST /v1/respond, 10 s at 32 connections, 1,000 end users in turn per organization, generated everyday chat messages; ${ROUNDS} rounds alternating which goes first, medians`,
      on: onMedian,
      off: offMedian,
      on_to_off_requests_per_sec: ratio,
      off_to_on_service_cpu: round3(
        offMedian.service_cpu_ms_per_request / onMedian.service_cpu_ms_per_request,
      ),
      per_round_ratio: rounds.map((r) => round3(r.on.requests_per_sec / r.off.requests_per_sec)),
      per_round: rounds,
      goal: 'on >= 0.95 of off (requests/s)',
      goal_met: ratio >= 0.95,
    };
  } finally {
    await service.stop();
  }
}

interface StreamOutcome {
  status: number;
  sentAt: number;
  /** performance.now() when the first `event: delta` arrived. */
  firstDeltaAt: number | undefined;
  done: boolean;
}

/** One streamed POST /v1/respond, read to its end on plain node:http. */
function streamOnce(
  service: RunningService,
  tenant: Tenant,
  userId: string,
  message: string,
): Promise<StreamOutcome> {
  return new Promise((resolve, reject) => {
    const sentAt = performance.now();
    const body = JSON.stringify({
      personality_id: tenant.personalityId,
      user_id: userId,
      message,
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
            sentAt,
            firstDeltaAt,
            done: /event: done\ndata: [^\n]+\n\n$/.test(text),
          }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

const lastUserMessage = (request: RecordedChatRequest) =>
  [...(request.body?.messages ?? [])].reverse().find((m) => m.role === 'user')?.content;

/**
 * Figure 2: streamed replies (RESPONSE_ENGINE=openai against the fake provider, which streams a
 * multi-sentence reply in 4-character chunks 20 ms apart), output moderation `block` against
 * `off`: the added delay before the first `delta`.
 */
async function streaming(messages: string[]) {
  const fake = await FakeOpenAI.start();
  const service = await startService({
    env: {
      RESPONSE_ENGINE: 'openai',
      OPENAI_BASE_URL: fake.url,
      OPENAI_API_KEY: 'bench-key',
      OPENAI_MODEL: 'gpt-bench',
      ENGINE_TIMEOUT_MS: '30000',
    },
  });
  try {
    const block = await benchTenant(service.baseUrl);
    const off = await benchTenant(service.baseUrl);
    await patchSafety(service, off, { output_moderation: 'off' });
    const replyOf = new Map<string, string>(
      messages.map((m, i) => [m, REPLIES[i % REPLIES.length]]),
    );
    fake.respondAlwaysWith((request) => ({
      content: {
        text: replyOf.get(lastUserMessage(request) as string) ?? REPLIES[0],
        emotion: 'caring',
        intensity: 0.6,
        facts: [],
      },
      stream: { chunkSize: CHUNK_CHARACTERS, intervalMs: CHUNK_INTERVAL_MS },
    }));

    const used = new Set<RecordedChatRequest>();
    const one = async (tenant: Tenant, tag: string, i: number) => {
      const message = messages[i];
      const outcome = await streamOnce(service, tenant, `stream-${tag}-${i % 50}`, message);
      // The provider's request for this stream: the message is this stream's alone at the time.
      const provider = fake.requests.find((r) => !used.has(r) && lastUserMessage(r) === message);
      if (provider) used.add(provider);
      if (outcome.status !== 200 || !outcome.done || !outcome.firstDeltaAt) {
        throw new Error(`stream ${tag} ${i}: ${JSON.stringify(outcome)}`);
      }
      if (!provider?.firstContentAt) throw new Error(`stream ${tag} ${i}: no provider request`);
      return {
        afterProviderMs: outcome.firstDeltaAt - provider.firstContentAt,
        afterRequestMs: outcome.firstDeltaAt - outcome.sentAt,
      };
    };
    // Warm-up: JIT, pools, the SDK's keep-alive, the settings caches.
    await Promise.all([0, 1, 2, 3].map((i) => one(block, 'w', i)));
    await Promise.all([4, 5, 6, 7].map((i) => one(off, 'w', i)));

    const loadBefore = load1();
    const pairs: Array<{
      reply: number;
      block: number;
      off: number;
      blockReq: number;
      offReq: number;
    }> = [];
    for (let start = 0; start < PAIRS; start += PAIRS_AT_ONCE) {
      const batch = Array.from(
        { length: Math.min(PAIRS_AT_ONCE, PAIRS - start) },
        (_, k) => start + k + 8,
      );
      // Each message to both organizations, one after the other (which first alternates); the
      // pairs of the batch at once.
      const results = await Promise.all(
        batch.map(async (i) => {
          let b: Awaited<ReturnType<typeof one>>;
          let o: Awaited<ReturnType<typeof one>>;
          if (i % 2 === 0) {
            b = await one(block, 'b', i);
            o = await one(off, 'o', i);
          } else {
            o = await one(off, 'o', i);
            b = await one(block, 'b', i);
          }
          return {
            reply: i % REPLIES.length,
            block: b.afterProviderMs,
            off: o.afterProviderMs,
            blockReq: b.afterRequestMs,
            offReq: o.afterRequestMs,
          };
        }),
      );
      pairs.push(...results);
    }
    const loadAfter = load1();
    const added = pairs.map((p) => p.block - p.off);
    const stats = (values: number[]) => ({
      p50_ms: round2(percentile(values, 50)),
      p90_ms: round2(percentile(values, 90)),
      p99_ms: round2(percentile(values, 99)),
      max_ms: round2(Math.max(...values)),
    });
    // What the sentence gate must wait for: the chunks of the first sentence after the one that
    // carries its first character (which is when the delta goes out with moderation off).
    const prefix = '{"text":"'.length;
    const floorOf = (reply: string) =>
      (Math.ceil((prefix + firstSentence(reply).length) / CHUNK_CHARACTERS) -
        Math.ceil((prefix + 1) / CHUNK_CHARACTERS)) *
      CHUNK_INTERVAL_MS;
    const perReply = REPLIES.map((reply, index) => {
      const of = pairs.filter((p) => p.reply === index).map((p) => p.block - p.off);
      return {
        first_sentence_characters: firstSentence(reply).trimEnd().length,
        waiting_for_the_first_sentence_ms: floorOf(reply),
        added_p50_ms: of.length ? round2(percentile(of, 50)) : null,
      };
    });
    const addedP50 = percentile(added, 50);
    const beyond = pairs.map((p) => p.block - p.off - floorOf(REPLIES[p.reply]));
    return {
      method: `one service, RESPONSE_ENGINE=openai against test/support/fake-openai.ts, which streams a JSON reply (${REPLIES.length} multi-sentence companion replies in turn) in ${CHUNK_CHARACTERS}-character chunks ${CHUNK_INTERVAL_MS} ms apart (about 50 tokens/s); two organizations, output_moderation block (the default) and off, everything else at its defaults; ${PAIRS} messages, each sent to both (one after the other, which first alternating; ${PAIRS_AT_ONCE} pairs at once), each stream read to its end`,
      measured:
        "per stream, the first `event: delta` at the client minus the provider's first content chunk (performance.now() of the bench process, which runs the fake and the clients); added delay = block minus off for the same message and reply",
      streams: pairs.length * 2,
      first_delta_after_provider_first_chunk: {
        output_moderation_block: stats(pairs.map((p) => p.block)),
        output_moderation_off: stats(pairs.map((p) => p.off)),
      },
      first_delta_after_request: {
        output_moderation_block: stats(pairs.map((p) => p.blockReq)),
        output_moderation_off: stats(pairs.map((p) => p.offReq)),
      },
      added_delay: stats(added),
      added_delay_beyond_waiting_for_the_first_sentence: {
        ...stats(beyond),
        note: 'the gate and the check themselves: the added delay minus the chunks of the first sentence after its first character, at 20 ms each',
      },
      added_delay_by_reply: perReply,
      load_average_1m: [loadBefore, loadAfter],
      goal: 'added delay p50 <= 150 ms',
      goal_met: addedP50 <= 150,
    };
  } finally {
    await service.stop();
    await fake.close();
  }
}

/**
 * Safety's cost in a conversation (issue 22): non-streamed /v1/respond (local engine, local
 * classifier) with safety at its defaults against every setting off (goal >= 0.95 of the rate),
 * and the delay output moderation `block` adds before a streamed reply's first `delta` (goal p50
 * <= 150 ms).
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const next = random(SEED);
  const messages = Array.from({ length: 1_000 }, () => userMessage(next));
  const unique = [...new Set(messages)];
  const nonStreamed = await throughput(messages);
  const streamed = await streaming(unique);
  return {
    load_average_at_start: loadAtStart,
    load_average_at_end: loadAverages(),
    machine_note:
      'a shared machine: 2 cores, other work running beside the bench (see the load averages): rounds alternate and the figures are ratios of the same run',
    messages:
      'generated everyday chat (support/chat-text.ts), none a crisis or a moderated message',
    respond_safety_defaults_vs_off: nonStreamed,
    streaming_output_moderation_block_vs_off: streamed,
  };
}
