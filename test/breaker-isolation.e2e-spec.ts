import { MetricsService } from '../src/metrics/metrics.service';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { FakeOpenAI, type FakeReply, type RecordedChatRequest } from './support/fake-openai';
import { tenantWithKey } from './support/identity';
import { type OwnRedis, startOwnRedis } from './support/redis-server';
import { parseEvents } from './support/sse';
import { createTestApp, type TestApp } from './support/test-app';

/**
 * Contract §29, "Shared breakers count only the provider's failures": tenant A's messages make
 * the model refuse or answer nothing (as a real model does for a message it refuses, or for a
 * system prompt that asks for it), 100 of them in concurrent bursts; tenant B's replies, sent
 * during and between the bursts, are every one served by the primary. On one instance, and on
 * two sharing their breakers through Redis.
 */

const BURSTS = 10;
const BURST_SIZE = 10;
const FAIR_PER_BURST = 3;

/** What the model says to A: refusals and empty answers, in turn; B gets the default echo. */
const HOSTILE_ANSWERS: FakeReply[] = [
  { refusal: "I'm sorry, I can't help with that." },
  { content: { text: '', emotion: 'neutral', intensity: 0 } },
  { content: '' },
  { content: { text: '   ', emotion: 'neutral', intensity: 0 } },
];

function lastUserMessage(request: RecordedChatRequest): string {
  const user = [...(request.body?.messages ?? [])].reverse().find((m) => m.role === 'user');
  return typeof user?.content === 'string' ? user.content : '';
}

let hostileAnswered = 0;
const modelAnswer = (request: RecordedChatRequest): FakeReply =>
  lastUserMessage(request).startsWith('hostile')
    ? HOSTILE_ANSWERS[hostileAnswered++ % HOSTILE_ANSWERS.length]
    : {};

async function tenantOn(t: TestApp) {
  const tenant = await tenantWithKey(t, ['read_write']);
  return { ...tenant, personalityId: await clonePersonality(t, tenant.auth) };
}
type Tenant = Awaited<ReturnType<typeof tenantOn>>;

function respond(on: TestApp, who: Tenant, message: string, stream = false) {
  return on
    .http()
    .post('/v1/respond')
    .set('Authorization', who.auth)
    .send({ personality_id: who.personalityId, user_id: uniqueUserId('iso'), message, stream })
    .then((response) => response);
}

async function breakerGauges(t: TestApp): Promise<number[]> {
  const metric = await t.app
    .get(MetricsService)
    .registry.getSingleMetric('engine_breaker_open')!
    .get();
  return metric.values.map(({ value }) => value);
}

/**
 * A's 100 hostile requests in bursts of 10 (every fourth streamed), each burst with 3 of B's
 * requests sent alongside and one after it, spread over the instances.
 */
async function attack(instances: TestApp[], a: Tenant, b: Tenant, primary: FakeOpenAI) {
  const fair: Array<{ status: number; model: unknown }> = [];
  const hostile: string[] = [];
  const on = (i: number) => instances[i % instances.length];
  for (let burst = 0; burst < BURSTS; burst++) {
    const [attacks, during] = await Promise.all([
      Promise.all(
        Array.from({ length: BURST_SIZE }, (_, i) =>
          respond(on(burst + i), a, `hostile ${burst}.${i}`, i % 4 === 3),
        ),
      ),
      Promise.all(
        Array.from({ length: FAIR_PER_BURST }, (_, i) =>
          respond(on(burst + i + 1), b, `fair ${burst}.${i}`),
        ),
      ),
    ]);
    const after = await respond(on(burst), b, `fair ${burst}.after`);
    for (const response of [...during, after]) {
      fair.push({ status: response.status, model: response.body?.model });
    }
    for (const response of attacks) {
      hostile.push(
        response.status === 200
          ? `stream ended with ${String(parseEvents(response.text).at(-1)?.event)}`
          : `${response.status} ${response.body?.error?.code}`,
      );
    }
  }
  const fairAtPrimary = primary.requests.filter((request) =>
    lastUserMessage(request).startsWith('fair'),
  ).length;
  return { fair, hostile, fairAtPrimary };
}

function expectIsolated(outcome: Awaited<ReturnType<typeof attack>>) {
  const total = BURSTS * (FAIR_PER_BURST + 1);
  // Every one of B's replies, by the primary, which none of them found paused.
  expect(outcome.fair.filter((r) => r.status === 200 && r.model === 'primary-model')).toHaveLength(
    total,
  );
  expect(outcome.fairAtPrimary).toBe(total);
  // A gets what its model said: no reply (502, or the stream's error event).
  expect(outcome.hostile).toHaveLength(BURSTS * BURST_SIZE);
  expect(new Set(outcome.hostile)).toEqual(
    new Set(['502 engine_unavailable', 'stream ended with error']),
  );
}

describe('Shared breakers count only the provider’s failures (contract §29)', () => {
  let primary: FakeOpenAI;
  let fallback: FakeOpenAI;

  beforeAll(async () => {
    primary = await FakeOpenAI.start();
    fallback = await FakeOpenAI.start();
  });
  beforeEach(() => {
    for (const fake of [primary, fallback]) {
      fake.reset();
      fake.respondAlwaysWith(modelAnswer);
    }
  });
  afterAll(async () => {
    await primary?.close();
    await fallback?.close();
  });

  const env = () => ({
    RESPONSE_ENGINE: 'openai',
    OPENAI_BASE_URL: primary.url,
    OPENAI_MODEL: 'primary-model',
    OPENAI_FALLBACKS: JSON.stringify([{ model: 'fallback-model', base_url: fallback.url }]),
    // The defaults: five failures in a row open a route for 30 s.
    ENGINE_BREAKER_FAILURES: '5',
    ENGINE_BREAKER_COOLDOWN_MS: '30000',
  });

  describe('on one instance', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await createTestApp({ env: { ...env(), REDIS_URL: undefined } });
    });
    afterAll(async () => {
      await t?.close();
    });

    it('serves all of tenant B while tenant A’s 100 replies are refusals and empty answers', async () => {
      const [a, b] = [await tenantOn(t), await tenantOn(t)];
      expectIsolated(await attack([t], a, b, primary));
      // A's answers reached both routes (each of the 80 not streamed went on to the fallback; a
      // stream whose blank text was sent is not tried again), and neither route's breaker opened.
      expect(fallback.requests.length).toBeGreaterThanOrEqual(80);
      expect(await breakerGauges(t)).toEqual([0, 0]);
    });
  });

  describe('on two instances sharing their breakers through Redis', () => {
    let redis: OwnRedis;
    let a1: TestApp;
    let a2: TestApp;

    beforeAll(async () => {
      redis = await startOwnRedis();
      a1 = await createTestApp({ env: { ...env(), REDIS_URL: redis.url } });
      a2 = await createTestApp({ env: { ...env(), REDIS_URL: redis.url } });
    });
    afterAll(async () => {
      await a1?.close();
      await a2?.close();
      await redis?.kill();
    });

    it('serves all of tenant B on both while tenant A’s 100 replies are refusals and empty answers', async () => {
      const [a, b] = [await tenantOn(a1), await tenantOn(a1)];
      expectIsolated(await attack([a1, a2], a, b, primary));
      expect(await breakerGauges(a1)).toEqual([0, 0]);
      expect(await breakerGauges(a2)).toEqual([0, 0]);
    });
  });
});
