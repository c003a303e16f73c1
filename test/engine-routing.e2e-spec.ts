import { DataSource } from 'typeorm';
import { Clock, ManualClock } from '../src/common/time/clock';
import { MetricsService } from '../src/metrics/metrics.service';
import {
  CircuitBreakers,
  SHARED_STATE_TTL_MS,
} from '../src/respond/engine/routing/circuit-breakers';
import { expectError } from './support/assertions';
import { ensureBuilt, runBuilt } from './support/built-app';
import { ShiftedClock } from './support/clocks';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { completionChunk, FakeOpenAI, type FakeReply } from './support/fake-openai';
import { tenantWithKey } from './support/identity';
import { freePort } from './support/ports';
import { type OwnRedis, startOwnRedis } from './support/redis-server';
import { parseEvents } from './support/sse';
import { createTestApp, type TestApp, type TestAppOptions } from './support/test-app';

type Tenant = Awaited<ReturnType<typeof tenantWithKey>>;

interface Counts {
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
}
type TokenUsage = Counts & { by_model: Array<Counts & { model: string }> };

/** A tenant, a personality and the helpers every describe below uses on one app. */
async function conversationOn(t: TestApp) {
  const tenant: Tenant = await tenantWithKey(t, ['read_write']);
  const personalityId = await clonePersonality(t, tenant.auth);
  // Streamed deltas as the provider sends them (output moderation's gate is safety's spec).
  await t
    .http()
    .patch(`/v1/organizations/${tenant.organizationId}/safety`)
    .set('Authorization', `Bearer ${tenant.accessToken}`)
    .send({ output_moderation: 'off' })
    .expect(200);
  const db = t.app.get(DataSource);
  return {
    tenant,
    personalityId,
    respond: (body: Record<string, unknown>, on: TestApp = t) =>
      on
        .http()
        .post('/v1/respond')
        .set('Authorization', tenant.auth)
        .send({ personality_id: personalityId, user_id: uniqueUserId('route'), ...body }),
    stored: async (userId: string) => {
      const [row] = await db.query<Array<{ memories: number }>>(
        `SELECT count(m.id)::int AS memories FROM end_users e
           LEFT JOIN memories m ON m.end_user_id = e.id
          WHERE e.organization_id = $1 AND e.user_id = $2`,
        [tenant.organizationId, userId],
      );
      return row?.memories ?? 0;
    },
    tokens: async () =>
      (await t.http().get('/v1/usage/tokens').set('Authorization', tenant.auth)).body as TokenUsage,
  };
}

/** The app's metric samples whose labels match, as `{labels: value}`. */
async function samples(t: TestApp, name: string, match: Record<string, string> = {}) {
  const metric = await t.app.get(MetricsService).registry.getSingleMetric(name)!.get();
  return metric.values
    .filter(({ labels }) => Object.entries(match).every(([key, value]) => labels[key] === value))
    .map(({ labels, value }) => ({ ...labels, value }));
}

const modelCount = (usage: TokenUsage, model: string) =>
  usage.by_model.find((entry) => entry.model === model)?.requests ?? 0;

describe('A model path that does not fail the user (contract §21)', () => {
  let primary: FakeOpenAI;
  let fallback: FakeOpenAI;
  let last: FakeOpenAI;
  let t: TestApp;
  let c: Awaited<ReturnType<typeof conversationOn>>;

  beforeAll(async () => {
    primary = await FakeOpenAI.start({ apiKey: 'sk-primary' });
    fallback = await FakeOpenAI.start({ apiKey: 'sk-fallback' });
    last = await FakeOpenAI.start({ apiKey: 'sk-primary' });
    t = await createTestApp({
      env: {
        RESPONSE_ENGINE: 'openai',
        OPENAI_BASE_URL: primary.url,
        OPENAI_API_KEY: 'sk-primary',
        OPENAI_MODEL: 'primary-model',
        FALLBACK_PROVIDER_KEY: 'sk-fallback',
        OPENAI_FALLBACKS: JSON.stringify([
          { model: 'fallback-model', base_url: fallback.url, api_key_env: 'FALLBACK_PROVIDER_KEY' },
          // The default key (OPENAI_API_KEY) on a third server.
          { model: 'last-model', base_url: last.url },
        ]),
        ENGINE_TIMEOUT_MS: '3000',
        ENGINE_MAX_TOKENS: '321',
        // Each test's failures are its own here; the breaker has its own describe below.
        ENGINE_BREAKER_FAILURES: '1000',
        STREAM_IDLE_TIMEOUT_MS: '2000',
      },
    });
    c = await conversationOn(t);
  });
  afterEach(() => {
    for (const fake of [primary, fallback, last]) fake.reset();
  });
  afterAll(async () => {
    await t?.close();
    for (const fake of [primary, fallback, last]) await fake?.close();
  });

  it('asks the primary with the reply’s token cap and says which model answered', async () => {
    const response = await c.respond({ message: 'hello' });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({
      model: 'primary-model',
      reply: { text: 'echo: hello' },
    });
    const sent = primary.lastRequest();
    expect(sent.authorization).toBe('Bearer sk-primary');
    expect(sent.body).toMatchObject({ model: 'primary-model', max_completion_tokens: 321 });
    expect(sent.body).not.toHaveProperty('max_tokens');
    expect(fallback.requests).toHaveLength(0);
  });

  it('retries a 503 once, then turns to the fallback with its own key; one reply counted, once stored', async () => {
    const before = await c.tokens();
    primary.respondAlwaysWith({ error: { status: 503 } });
    fallback.respondWith({
      usage: { prompt_tokens: 40, completion_tokens: 10, cached_tokens: 32 },
    });
    const userId = uniqueUserId('fallback');
    const response = await c.respond({ user_id: userId, message: 'are you there?' });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({
      model: 'fallback-model',
      reply: { text: 'echo: are you there?' },
    });
    expect(primary.requests).toHaveLength(2);
    expect(fallback.requests).toHaveLength(1);
    expect(fallback.lastRequest().authorization).toBe('Bearer sk-fallback');
    expect(fallback.lastRequest().body?.model).toBe('fallback-model');
    expect(last.requests).toHaveLength(0);
    expect(await c.stored(userId)).toBe(2);
    const after = await c.tokens();
    expect(after.requests).toBe(before.requests + 1);
    expect(after.cached_tokens).toBe(before.cached_tokens + 32);
    expect(modelCount(after, 'fallback-model')).toBe(modelCount(before, 'fallback-model') + 1);
    expect(modelCount(after, 'primary-model')).toBe(modelCount(before, 'primary-model'));
  });

  it('streams from the fallback when the primary fails before the first piece: one set of deltas, done names the model', async () => {
    primary.respondWith({ error: { status: 429 } }, { error: { status: 500 } });
    fallback.respondWith({
      content: { text: 'Here I am.', emotion: 'joy', intensity: 0.5 },
      stream: { chunkSize: 3 },
    });
    const response = await c.respond({ message: 'stream please', stream: true });
    const events = parseEvents(response.text);
    const text = events
      .filter((event) => event.event === 'delta')
      .map((event) => (event.data as { text: string }).text)
      .join('');
    expect(text).toBe('Here I am.');
    expect(events.at(-1)).toMatchObject({
      event: 'done',
      data: { model: 'fallback-model', reply: { text: 'Here I am.' } },
    });
    expect(primary.requests).toHaveLength(2);
  });

  it('waits at most 2 s for a Retry-After of an hour, within ENGINE_TIMEOUT_MS', async () => {
    primary.respondWith({ error: { status: 429, retryAfter: '3600' } });
    const started = Date.now();
    const response = await c.respond({ message: 'patience' });
    const took = Date.now() - started;
    expect(response.status).toBe(200);
    expect(response.body.model).toBe('primary-model');
    expect(primary.requests).toHaveLength(2);
    expect(took).toBeGreaterThanOrEqual(1_900);
    // The wait fitted in ENGINE_TIMEOUT_MS (3 s), or the primary's second attempt would not have
    // answered: the fallback would have, or a 504. The hour itself would be far past this bound;
    // the 2 s over ENGINE_TIMEOUT_MS are for the rest of the request on a loaded machine.
    expect(took).toBeLessThan(3_000 + 2_000);
  });

  it.each([
    ['a 404 (no such model)', { error: { status: 404 } }],
    ['a 401 (a key the provider refuses)', { error: { status: 401 } }],
    ['a 400 (a request it refuses)', { error: { status: 400 } }],
    ['a 200 of garbage', { raw: { body: '<html>502 Bad Gateway</html>' } }],
    ['a 200 that is no completion', { raw: { contentType: 'text/plain', body: 'OK' } }],
    ['an empty reply', { content: '' }],
  ] as Array<[string, FakeReply]>)(
    'does not retry %s on the same route: the fallback answers',
    async (_case, reply) => {
      primary.respondAlwaysWith(reply);
      const response = await c.respond({ message: 'next one' });
      expect(response.status).toBe(200);
      expect(response.body.model).toBe('fallback-model');
      expect(primary.requests).toHaveLength(1);
    },
  );

  it('retries a connection reset before any header, and a stream cut before its first piece', async () => {
    primary.respondWith({ reset: true });
    expect((await c.respond({ message: 'reset' })).body.model).toBe('primary-model');
    expect(primary.requests).toHaveLength(2);

    primary.reset();
    primary.respondWith({ stream: { dropAfter: 0 } });
    const response = await c.respond({ message: 'cut', stream: true });
    expect(parseEvents(response.text).at(-1)).toMatchObject({
      event: 'done',
      data: { model: 'primary-model', reply: { text: 'echo: cut' } },
    });
    expect(primary.requests).toHaveLength(2);
  });

  it('turns to the second fallback when the first is itself down', async () => {
    primary.respondAlwaysWith({ error: { status: 500 } });
    fallback.respondAlwaysWith({ reset: true });
    const response = await c.respond({ message: 'anyone?' });
    expect(response.status).toBe(200);
    expect(response.body.model).toBe('last-model');
    expect([primary.requests.length, fallback.requests.length, last.requests.length]).toEqual([
      2, 2, 1,
    ]);
  });

  it('answers 502 when every route fails, having stored and counted nothing', async () => {
    const before = await c.tokens();
    for (const fake of [primary, fallback, last])
      fake.respondAlwaysWith({ error: { status: 502 } });
    const userId = uniqueUserId('nobody');
    const started = Date.now();
    const response = await c.respond({ user_id: userId, message: 'hello?' });
    expectError(response, 502, 'engine_unavailable');
    expect(response.body.error.message).toBe(
      'The model provider failed (HTTP 502) after 6 attempts',
    );
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(await c.stored(userId)).toBe(0);
    expect(await c.tokens()).toEqual(before);
    // Each failed attempt followed by another is `retried`; the reply is one `error`.
    expect(await samples(t, 'engine_requests_total', { outcome: 'error' })).toContainEqual(
      expect.objectContaining({ engine: 'openai', model: 'last-model' }),
    );
  });

  it('counts the tokens of an answer it could not use, whether the next route answers or not', async () => {
    const before = await c.tokens();
    const refused = { refusal: 'No.', usage: { prompt_tokens: 30, completion_tokens: 4 } };
    primary.respondWith(refused);
    fallback.respondWith({ usage: { prompt_tokens: 20, completion_tokens: 5 } });
    const answered = await c.respond({ message: 'refuse me first' });
    expect(answered.body.model).toBe('fallback-model');
    const afterOne = await c.tokens();
    expect(afterOne).toMatchObject({
      requests: before.requests + 1,
      prompt_tokens: before.prompt_tokens + 50,
      completion_tokens: before.completion_tokens + 9,
    });

    // Every route refuses, streamed: no reply, no request, the three refusals' tokens.
    for (const fake of [primary, fallback, last]) fake.respondAlwaysWith(refused);
    const streamed = await c.respond({ message: 'refuse me', stream: true });
    expect(parseEvents(streamed.text).at(-1)).toMatchObject({ event: 'error' });
    const afterAll = await c.tokens();
    expect(afterAll).toMatchObject({
      requests: afterOne.requests,
      prompt_tokens: afterOne.prompt_tokens + 90,
      completion_tokens: afterOne.completion_tokens + 12,
    });

    // A content filter's stop with no text at all, not streamed: billed too.
    for (const fake of [primary, fallback, last]) {
      fake.respondAlwaysWith({
        finishReason: 'content_filter',
        usage: { prompt_tokens: 11, completion_tokens: 0 },
      });
    }
    expect((await c.respond({ message: 'filter me' })).status).toBe(502);
    expect(await c.tokens()).toMatchObject({
      requests: afterAll.requests,
      prompt_tokens: afterAll.prompt_tokens + 33,
      completion_tokens: afterAll.completion_tokens,
    });
  });

  it('ends in 504 within ENGINE_TIMEOUT_MS when the provider hangs after its headers', async () => {
    primary.respondAlwaysWith({ hangAfterHeaders: true });
    const userId = uniqueUserId('hung');
    const started = Date.now();
    expectError(await c.respond({ user_id: userId, message: 'hang' }), 504, 'engine_timeout');
    // The provider never answers: only ENGINE_TIMEOUT_MS (3 s) ends the call. The 2 s over it are
    // for the rest of the request on a loaded machine.
    expect(Date.now() - started).toBeLessThan(3_000 + 2_000);
    const streamed = await c.respond({ user_id: userId, message: 'hang', stream: true });
    expect(parseEvents(streamed.text).at(-1)).toMatchObject({
      event: 'error',
      data: { error: { code: 'engine_timeout' } },
    });
    expect(await c.stored(userId)).toBe(0);
    await primary.waitForAborted(2);
  });

  it('retries nothing once a piece of the reply reached the client: the stream ends with an error', async () => {
    primary.respondWith({ stream: { chunkSize: 4, intervalMs: 20, dropAfter: 5 } });
    const userId = uniqueUserId('half');
    const response = await c.respond({ user_id: userId, message: 'half a stream', stream: true });
    const events = parseEvents(response.text);
    expect(events.some((event) => event.event === 'delta')).toBe(true);
    expect(events.at(-1)).toMatchObject({
      event: 'error',
      data: { error: { code: 'engine_unavailable' } },
    });
    expect(primary.requests).toHaveLength(1);
    expect(fallback.requests).toHaveLength(0);
    expect(await c.stored(userId)).toBe(0);
  });

  // ENGINE_MAX_TOKENS 321: at most 321 × 16 + 4,096 = 9,232 characters are read of an answer.
  it('refuses a streamed tool call numbered past any real answer, and counts what came', async () => {
    const event = completionChunk;
    const far = {
      contentType: 'text/event-stream',
      body:
        event({
          tool_calls: [{ index: 1e9, id: 'call_far', type: 'function', function: { name: 'x' } }],
        }) +
        event({}, 'tool_calls') +
        'data: [DONE]\n\n',
    };
    for (const fake of [primary, fallback, last]) fake.respondAlwaysWith({ raw: far });
    const before = await c.tokens();
    const response = await c.respond({ message: 'call far away', stream: true });
    expect(parseEvents(response.text).at(-1)).toMatchObject({
      event: 'error',
      data: { error: { code: 'engine_unavailable' } },
    });
    // Each route's answer came, unusable, without usage: its estimate counts. Before, the
    // estimate wrote out a sparse array of a billion slots and failed (RangeError): nothing.
    const after = await c.tokens();
    expect(after.requests).toBe(before.requests);
    expect(after.prompt_tokens).toBeGreaterThan(before.prompt_tokens);
  });

  it('cuts off a provider that ignores max_completion_tokens instead of reading it without end', async () => {
    const endless = 'on and on '.repeat(3_000);
    primary.respondWith({ content: endless, stream: { chunkSize: 500, intervalMs: 5 } });
    const userId = uniqueUserId('endless');
    const before = await c.tokens();
    const streamed = await c.respond({ user_id: userId, message: 'talk', stream: true });
    const events = parseEvents(streamed.text);
    const deltas = events.filter((event) => event.event === 'delta');
    const sent = deltas.map((event) => (event.data as { text: string }).text).join('');
    expect(sent.length).toBeGreaterThan(8_000);
    expect(sent.length).toBeLessThanOrEqual(9_232);
    expect(events.at(-1)).toMatchObject({
      event: 'error',
      data: { error: { code: 'engine_unavailable' } },
    });
    await primary.waitForAborted(1);
    expect(await c.stored(userId)).toBe(0);
    // What it read, cut past the cap, is counted at about 4 bytes a token: the provider wrote
    // past the cap, no client chose it, and a token a byte counted 16 times the cap (review).
    const read = (await c.tokens()).completion_tokens - before.completion_tokens;
    expect(read).toBeGreaterThanOrEqual(Math.ceil(8_000 / 4));
    expect(read).toBeLessThanOrEqual(Math.ceil((9_232 + 500) / 4));

    // Not streamed, nothing reached the client yet: the next route answers.
    primary.respondWith({ content: endless });
    const whole = await c.respond({ user_id: userId, message: 'talk again' });
    expect(whole.status).toBe(200);
    expect(whole.body.model).toBe('fallback-model');

    // It ignored max_completion_tokens: it is asked with max_tokens since, which such servers
    // (Ollama, LM Studio) read (review: budgets were overshot by its answers).
    const capped = await c.respond({ user_id: userId, message: 'and now?' });
    expect(capped.body.model).toBe('primary-model');
    expect(primary.lastRequest().body).toMatchObject({ max_tokens: 321 });
    expect(primary.lastRequest().body).not.toHaveProperty('max_completion_tokens');
    // The fallback, which kept within it, is asked as before.
    expect(fallback.lastRequest().body).toMatchObject({ max_completion_tokens: 321 });
  });
});

describe('A provider that reports answers past max_completion_tokens', () => {
  let primary: FakeOpenAI;
  let t: TestApp;

  beforeAll(async () => {
    primary = await FakeOpenAI.start();
    t = await createTestApp({
      env: {
        RESPONSE_ENGINE: 'openai',
        OPENAI_BASE_URL: primary.url,
        OPENAI_MODEL: 'local-model',
        ENGINE_MAX_TOKENS: '100',
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    await primary?.close();
  });

  it('is asked with max_tokens once a count is clearly past the cap; a count near it changes nothing', async () => {
    const c = await conversationOn(t);
    const asked = () => primary.lastRequest().body;
    // 125 of 100: a count a little off is no sign (a reasoning model needs the field).
    primary.respondWith({ content: 'near', usage: { prompt_tokens: 10, completion_tokens: 125 } });
    expect((await c.respond({ message: 'one' })).status).toBe(200);
    primary.respondWith({ content: 'still' });
    expect((await c.respond({ message: 'two' })).status).toBe(200);
    expect(asked()).toMatchObject({ max_completion_tokens: 100 });
    // 500 of 100, within the read bound: counted, and the cap is asked for as max_tokens next.
    primary.respondWith({ content: 'long', usage: { prompt_tokens: 10, completion_tokens: 500 } });
    expect((await c.respond({ message: 'three' })).status).toBe(200);
    expect((await c.tokens()).completion_tokens).toBeGreaterThanOrEqual(625);
    primary.respondWith({ content: 'short' });
    expect((await c.respond({ message: 'four' })).status).toBe(200);
    expect(asked()).toMatchObject({ max_tokens: 100 });
    expect(asked()).not.toHaveProperty('max_completion_tokens');
  });

  it('counts a stream cut before its count no further than the cap it was sent (review)', async () => {
    const c = await conversationOn(t);
    const before = await c.tokens();
    // About 90 tokens of English in 405 bytes, within the cap of 100; the connection drops after
    // the last piece of text, before the finish and the count.
    const text = 'The quick brown fox jumps over the lazy dog. '.repeat(9);
    primary.respondWith({ content: text, stream: { chunkSize: 40, intervalMs: 5, dropAfter: 11 } });
    const streamed = await c.respond({ message: 'tell me', stream: true });
    expect(parseEvents(streamed.text).at(-1)).toMatchObject({ event: 'error' });
    // A token a byte of what was delivered counted four times what the provider billed.
    const after = await c.tokens();
    expect(after.completion_tokens - before.completion_tokens).toBe(100);
  });
});

describe('A primary that refuses connections', () => {
  let fallback: FakeOpenAI;
  let t: TestApp;

  beforeAll(async () => {
    fallback = await FakeOpenAI.start();
    t = await createTestApp({
      env: {
        RESPONSE_ENGINE: 'openai',
        // Nothing listens there: connection refused.
        OPENAI_BASE_URL: `http://127.0.0.1:${await freePort()}/v1`,
        OPENAI_MODEL: 'primary-model',
        OPENAI_FALLBACKS: JSON.stringify([{ model: 'local-model', base_url: fallback.url }]),
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    await fallback?.close();
  });

  it('is retried, then the fallback answers', async () => {
    const c = await conversationOn(t);
    const response = await c.respond({ message: 'hi' });
    expect(response.status).toBe(200);
    expect(response.body.model).toBe('local-model');
    expect(
      await samples(t, 'engine_requests_total', { model: 'primary-model', outcome: 'retried' }),
    ).toEqual([expect.objectContaining({ value: 2 })]);
  });
});

describe('The circuit breaker of one instance (no Redis)', () => {
  let primary: FakeOpenAI;
  let fallback: FakeOpenAI;
  let t: TestApp;
  let c: Awaited<ReturnType<typeof conversationOn>>;
  const clock = new ManualClock();
  const route = () => `primary-model@${primary.url}`;

  beforeAll(async () => {
    primary = await FakeOpenAI.start();
    fallback = await FakeOpenAI.start();
    t = await createTestApp({
      env: {
        RESPONSE_ENGINE: 'openai',
        OPENAI_BASE_URL: primary.url,
        OPENAI_MODEL: 'primary-model',
        OPENAI_FALLBACKS: JSON.stringify([{ model: 'fallback-model', base_url: fallback.url }]),
        ENGINE_BREAKER_FAILURES: '3',
        ENGINE_BREAKER_COOLDOWN_MS: '30000',
        REDIS_URL: undefined,
      },
      override: (builder) => builder.overrideProvider(Clock).useValue(clock),
    });
    c = await conversationOn(t);
  });
  afterAll(async () => {
    await t?.close();
    await primary?.close();
    await fallback?.close();
  });

  it('opens after 3 failed attempts (retries count), skips the primary without a call for the cool-down, then probes once', async () => {
    expect(await samples(t, 'engine_breaker_open')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ route: route(), value: 0 }),
        expect.objectContaining({ route: `fallback-model@${fallback.url}`, value: 0 }),
      ]),
    );
    primary.respondAlwaysWith({ error: { status: 500 } });
    // 2 attempts, then 1 more: the third failure in a row opens it (no second retry).
    await c.respond({ message: 'one' });
    await c.respond({ message: 'two' });
    expect(primary.requests).toHaveLength(3);
    expect(await samples(t, 'engine_breaker_open', { route: route() })).toEqual([
      expect.objectContaining({ value: 1 }),
    ]);

    primary.reset();
    for (let i = 0; i < 5; i++) {
      const response = await c.respond({ message: `skip ${i}` });
      expect(response.body.model).toBe('fallback-model');
    }
    clock.advance(29_999);
    expect((await c.respond({ message: 'still' })).body.model).toBe('fallback-model');
    expect(primary.requests).toHaveLength(0);
    expect(
      await samples(t, 'engine_requests_total', { model: 'primary-model', outcome: 'skipped' }),
      // The second reply's retry, the five, and 'still'.
    ).toEqual([expect.objectContaining({ value: 7 })]);

    // Half-open: of three at once, one probes the primary (healthy again, and slow enough that
    // the others arrive while it is out), two go elsewhere.
    clock.advance(1);
    primary.respondWith({ delayMs: 1_000 });
    const three = await Promise.all([1, 2, 3].map((i) => c.respond({ message: `probe ${i}` })));
    expect(three.map((r) => r.body.model).sort()).toEqual([
      'fallback-model',
      'fallback-model',
      'primary-model',
    ]);
    expect(primary.requests).toHaveLength(1);
    // Closed again.
    expect((await c.respond({ message: 'back' })).body.model).toBe('primary-model');
    expect(await samples(t, 'engine_breaker_open', { route: route() })).toEqual([
      expect.objectContaining({ value: 0 }),
    ]);
  });

  it('opens for another cool-down when the probe fails', async () => {
    primary.reset();
    primary.respondAlwaysWith({ error: { status: 500 } });
    await c.respond({ message: 'one' });
    await c.respond({ message: 'two' });
    clock.advance(30_000);
    primary.reset();
    primary.respondAlwaysWith({ error: { status: 500 } });
    // The probe fails; its retry is refused by the breaker, open again.
    expect((await c.respond({ message: 'probe' })).body.model).toBe('fallback-model');
    expect((await c.respond({ message: 'after' })).body.model).toBe('fallback-model');
    expect(primary.requests).toHaveLength(1);
    clock.advance(30_000);
    primary.reset();
    expect((await c.respond({ message: 'healed' })).body.model).toBe('primary-model');
  });

  it('answers 502 at once when every route’s breaker is open', async () => {
    primary.reset();
    fallback.reset();
    for (const fake of [primary, fallback]) fake.respondAlwaysWith({ error: { status: 500 } });
    await c.respond({ message: 'one' });
    await c.respond({ message: 'two' });
    primary.reset();
    fallback.reset();
    const response = await c.respond({ message: 'nobody home' });
    expectError(response, 502, 'engine_unavailable');
    expect(response.body.error.message).toMatch(/circuit breaker/);
    expect(primary.requests.length + fallback.requests.length).toBe(0);
    clock.advance(30_000);
  });
});

describe('One circuit breaker shared by two instances through Redis', () => {
  let redis: OwnRedis;
  let primary: FakeOpenAI;
  let fallback: FakeOpenAI;
  let a: TestApp;
  let b: TestApp;
  let c: Awaited<ReturnType<typeof conversationOn>>;
  let patientBreakers: jest.SpyInstance;
  // Everything from the breaker's opening to the last reply it skips must fit in it, on a loaded
  // machine too; the first test waits it out (Redis's clock), the second moves the instances' own.
  const cooldownMs = 5_000;
  /** Both instances' time: what their copies of the breaker decide by while Redis is gone. */
  const clock = new ShiftedClock();

  beforeAll(async () => {
    // A Redis call of the breakers is abandoned after BREAKER_REDIS_TIMEOUT_MS (50 ms), and the
    // instance decides from its own copy. Here both instances, their clients and the providers
    // share one process on a loaded machine: a pause of the event loop that long would send a
    // request of B to the primary, or a second probe, as a slow Redis would. These tests are about
    // a Redis that answers or is gone (its calls then fail at once: no offline queue, no
    // retries), so its calls are awaited to the end.
    patientBreakers = jest
      .spyOn(
        CircuitBreakers.prototype as unknown as {
          withTimeout: (work: Promise<unknown>) => Promise<unknown>;
        },
        'withTimeout',
      )
      .mockImplementation((work) => work);
    redis = await startOwnRedis();
    primary = await FakeOpenAI.start();
    fallback = await FakeOpenAI.start();
    const env = {
      RESPONSE_ENGINE: 'openai',
      OPENAI_BASE_URL: primary.url,
      OPENAI_MODEL: 'primary-model',
      OPENAI_FALLBACKS: JSON.stringify([{ model: 'fallback-model', base_url: fallback.url }]),
      ENGINE_RETRIES: '0',
      ENGINE_BREAKER_FAILURES: '2',
      ENGINE_BREAKER_COOLDOWN_MS: String(cooldownMs),
      REDIS_URL: redis.url,
    };
    const override: TestAppOptions['override'] = (builder) =>
      builder.overrideProvider(Clock).useValue(clock);
    a = await createTestApp({ env, override });
    b = await createTestApp({ env, override });
    c = await conversationOn(a);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await primary?.close();
    await fallback?.close();
    await redis?.kill();
    patientBreakers?.mockRestore();
  });

  /** Opens the breaker with two failures on instance A. */
  async function openOnA() {
    primary.reset();
    primary.respondAlwaysWith({ error: { status: 500 } });
    expect((await c.respond({ message: 'fail 1' })).body.model).toBe('fallback-model');
    expect((await c.respond({ message: 'fail 2' })).body.model).toBe('fallback-model');
    expect(primary.requests).toHaveLength(2);
    primary.reset();
  }

  it('skips the primary on instance B, which never saw it fail, then lets one probe through for both', async () => {
    await openOnA();
    for (let i = 0; i < 3; i++) {
      expect((await c.respond({ message: `on b ${i}` }, b)).body.model).toBe('fallback-model');
    }
    expect(primary.requests).toHaveLength(0);
    expect(
      await samples(b, 'engine_breaker_open', { route: `primary-model@${primary.url}` }),
    ).toEqual([expect.objectContaining({ value: 1 })]);

    // The cool-down is Redis's to end (a third party's timer: waited for). The probe is slow
    // enough that the other three arrive while it is out.
    await new Promise((resolve) => setTimeout(resolve, cooldownMs + 100));
    primary.respondWith({ delayMs: 1_000 });
    const four = await Promise.all(
      [a, b, a, b].map((instance, i) => c.respond({ message: `probe ${i}` }, instance)),
    );
    expect(four.filter((r) => r.body.model === 'primary-model')).toHaveLength(1);
    expect(primary.requests).toHaveLength(1);
    // The probe succeeded: closed for both.
    expect((await c.respond({ message: 'a again' }, a)).body.model).toBe('primary-model');
    expect((await c.respond({ message: 'b again' }, b)).body.model).toBe('primary-model');
  });

  it('keeps skipping the primary on both when Redis goes away while the breaker is open, then each probes on its own', async () => {
    await openOnA();
    // B learns of it from Redis once its copy is older than SHARED_STATE_TTL_MS.
    clock.advance(SHARED_STATE_TTL_MS);
    expect((await c.respond({ message: 'b learns' }, b)).body.model).toBe('fallback-model');
    await redis.kill();
    for (const instance of [a, b, a, b]) {
      const started = Date.now();
      const response = await c.respond({ message: 'no redis' }, instance);
      expect(response.body.model).toBe('fallback-model');
      expect(Date.now() - started).toBeLessThan(1_000);
    }
    expect(primary.requests).toHaveLength(0);
    // The cool-down each instance knew of ends on its own clock: each copy is half-open now, and
    // each sends its own probe.
    clock.advance(cooldownMs);
    expect((await c.respond({ message: 'a probes' }, a)).body.model).toBe('primary-model');
    expect((await c.respond({ message: 'b probes' }, b)).body.model).toBe('primary-model');
    expect(primary.requests).toHaveLength(2);
  });
});

describe('OPENAI_FALLBACKS that stops the start-up (node dist/main.js)', () => {
  beforeAll(() => ensureBuilt(), 180_000);

  it.each([
    ['not JSON', '[{model: "x"}', /OPENAI_FALLBACKS: is not JSON/],
    [
      'an entry without a model',
      '[{"base_url":"http://127.0.0.1:1/v1"}]',
      /OPENAI_FALLBACKS\[0\]\.model/,
    ],
    [
      'an unset key variable',
      '[{"model":"x","api_key_env":"UNSET_FALLBACK_KEY_VARIABLE"}]',
      /OPENAI_FALLBACKS\[0\]\.api_key_env: UNSET_FALLBACK_KEY_VARIABLE is not set/,
    ],
    [
      'a base_url that is not http(s)',
      '[{"model":"x","base_url":"file:///etc/passwd"}]',
      /OPENAI_FALLBACKS\[0\]\.base_url/,
    ],
  ])('%s: exits 1 naming the variable', async (_case, value, message) => {
    const app = runBuilt('main.js', [], {
      PORT: String(await freePort()),
      METRICS_PORT: '0',
      RESPONSE_ENGINE: 'openai',
      OPENAI_MODEL: 'x',
      OPENAI_FALLBACKS: value,
      UNSET_FALLBACK_KEY_VARIABLE: '',
    });
    expect(await app.exited).toBe(1);
    expect(app.output()).toMatch(message);
    expect(app.output()).not.toMatch(/listening/);
  });
});
