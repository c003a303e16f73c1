import { type OwnRedis, startOwnRedis } from '../../test/support/redis-server';
import {
  FakeOpenAI,
  type FakeReply,
  type RecordedChatRequest,
} from '../../test/support/fake-openai';
import { buildRevision } from '../lib/build-revision';
import { type RunningService, startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { loadAverages, percentile, round2, sleep } from './support/stats';

/**
 * Contract §29, "Shared breakers count only the provider's failures" (issue 28, finding 1): one
 * tenant sends, in bursts, messages whose model answers are refusals and empty answers; another
 * tenant's replies meanwhile should all be served. The code before the fix and this tree, each
 * built and run as in production (two instances sharing Redis, a primary and a fallback route,
 * the breaker's defaults: 5 failures, 30 s).
 */

/** The tree before the fix: the commit this branch started from. */
const BEFORE = process.env.BENCH_BEFORE ?? 'aec333f';
const SECONDS = Number(process.env.BENCH_BREAKER_SECONDS ?? 60);
const BURST_SIZE = 10;
const BURST_EVERY_MS = 2_000;
const FAIR_EVERY_MS = 250;

const HOSTILE_ANSWERS: FakeReply[] = [
  { refusal: "I'm sorry, I can't help with that." },
  { content: { text: '', emotion: 'neutral', intensity: 0 } },
  { content: '' },
];

function lastUserMessage(request: RecordedChatRequest): string {
  const user = [...(request.body?.messages ?? [])].reverse().find((m) => m.role === 'user');
  return typeof user?.content === 'string' ? user.content : '';
}

type Tenant = Awaited<ReturnType<typeof benchTenant>>;
let users = 0;

async function reply(service: RunningService, tenant: Tenant, message: string) {
  const startedAt = performance.now();
  const response = await fetch(`${service.baseUrl}/v1/respond`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: tenant.auth },
    body: JSON.stringify({
      personality_id: tenant.personalityId,
      user_id: `isolation-${users++}`,
      message,
    }),
  });
  const body = (await response.json()) as { model?: string; error?: { code: string } };
  return {
    status: response.status,
    model: body.model ?? body.error?.code ?? 'none',
    ms: performance.now() - startedAt,
  };
}

/** engine_breaker_open samples at 1 on the service's /metrics. */
async function openBreakers(metricsUrl: string): Promise<string[]> {
  const text = await (await fetch(metricsUrl)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('engine_breaker_open{') && line.trim().endsWith(' 1'));
}

async function attack(main: string | undefined) {
  const primary = await FakeOpenAI.start();
  const fallback = await FakeOpenAI.start();
  let answered = 0;
  for (const fake of [primary, fallback]) {
    fake.respondAlwaysWith((request) =>
      lastUserMessage(request).startsWith('hostile')
        ? HOSTILE_ANSWERS[answered++ % HOSTILE_ANSWERS.length]
        : {},
    );
  }
  const redis: OwnRedis = await startOwnRedis();
  const env = {
    RESPONSE_ENGINE: 'openai',
    OPENAI_BASE_URL: primary.url,
    OPENAI_API_KEY: 'sk-bench',
    OPENAI_MODEL: 'primary-model',
    OPENAI_FALLBACKS: JSON.stringify([{ model: 'fallback-model', base_url: fallback.url }]),
    REDIS_URL: redis.url,
    RATE_LIMIT_REDIS_PREFIX: `isolation-${Date.now()}:`,
  };
  const first = await startService({ env, main });
  const second = await startService({ env, main, databaseUrl: first.databaseUrl });
  const instances = [first, second];
  try {
    const hostileTenant = await benchTenant(first.baseUrl);
    const fairTenant = await benchTenant(first.baseUrl);
    const fair: Array<Awaited<ReturnType<typeof reply>>> = [];
    const hostile: Array<Awaited<ReturnType<typeof reply>>> = [];
    const deadline = Date.now() + SECONDS * 1000;
    const bursts = (async () => {
      for (let burst = 0; Date.now() < deadline; burst++) {
        const started = Date.now();
        hostile.push(
          ...(await Promise.all(
            Array.from({ length: BURST_SIZE }, (_, i) =>
              reply(instances[i % 2], hostileTenant, `hostile ${burst}.${i}`),
            ),
          )),
        );
        await sleep(Math.max(0, BURST_EVERY_MS - (Date.now() - started)));
      }
    })();
    const steady = (async () => {
      for (let i = 0; Date.now() < deadline; i++) {
        const started = Date.now();
        fair.push(await reply(instances[i % 2], fairTenant, `fair ${i}`));
        await sleep(Math.max(0, FAIR_EVERY_MS - (Date.now() - started)));
      }
    })();
    await Promise.all([bursts, steady]);
    const served = fair.filter((r) => r.status === 200);
    const byStatus = (list: typeof fair) =>
      list.reduce<Record<string, number>>((counts, r) => {
        const key = `${r.status} ${r.model}`;
        counts[key] = (counts[key] ?? 0) + 1;
        return counts;
      }, {});
    return {
      fair_tenant: {
        replies: fair.length,
        served: served.length,
        success_rate: round2(served.length / fair.length),
        by_outcome: byStatus(fair),
        latency_p50_ms: round2(
          percentile(
            fair.map((r) => r.ms),
            50,
          ),
        ),
        latency_p99_ms: round2(
          percentile(
            fair.map((r) => r.ms),
            99,
          ),
        ),
      },
      hostile_tenant: { replies: hostile.length, by_outcome: byStatus(hostile) },
      provider_calls: { primary: primary.requests.length, fallback: fallback.requests.length },
      breakers_open_at_end: [
        ...(await openBreakers(first.metricsUrl)),
        ...(await openBreakers(second.metricsUrl)),
      ],
    };
  } finally {
    for (const service of instances.reverse()) await service.stop();
    await redis.kill();
    await primary.close();
    await fallback.close();
  }
}

export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const before = buildRevision(BEFORE);
  try {
    const beforeFigures = await attack(before.main);
    const afterFigures = await attack(undefined);
    return {
      method: `${SECONDS} s; two instances of the built service sharing Redis and PostgreSQL, a primary and a fallback route (fake providers), ENGINE_BREAKER_FAILURES 5 and ENGINE_BREAKER_COOLDOWN_MS 30000 (the defaults); the hostile tenant sends bursts of ${BURST_SIZE} concurrent replies every ${BURST_EVERY_MS / 1000} s whose model answers are refusals (content null, refusal) and empty answers ({"text": ""}, ""), in turn, spread over both instances; the fair tenant sends one reply every ${FAIR_EVERY_MS} ms, alternating instances. before = ${BEFORE} built by bench/lib/build-revision.ts, after = this tree.`,
      before_revision: before.revision,
      load_average_at_start: loadAtStart,
      before: beforeFigures,
      after: afterFigures,
      goal: "the fair tenant's success rate 100 %, every reply by the primary",
      load_average_at_end: loadAverages(),
    };
  } finally {
    before.cleanup();
  }
}
