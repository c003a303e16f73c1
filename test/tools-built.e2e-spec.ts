import { randomUUID } from 'node:crypto';
import { expectError } from './support/assertions';
import {
  type BuiltProcess,
  ensureBuilt,
  httpTo,
  runBuilt,
  waitUntilReady,
} from './support/built-app';
import { uniqueUserId } from './support/data-plane';
import { eventually } from './support/wait';
import { FakeOpenAI, type FakeReply } from './support/fake-openai';
import { createFreshDatabase, type FreshDatabase } from './support/fresh-database';
import { tenantWithKey } from './support/identity';
import { freePort } from './support/ports';
import { parseExposition, valueOf } from './support/prometheus';
import { parseEvents } from './support/sse';
import { type HttpTarget, rateLimitDefaults } from './support/test-app';
import { createWebhookEndpoint, verifiedEvent } from './support/tools';
import { WebhookReceiver } from './support/webhook-receiver';

/**
 * Tools (contract §26) end to end against the built service (`node dist/main.js`, one start, a
 * database of its own): the `openai` engine talks to a fake OpenAI-compatible model that emits
 * tool calls, plain and streamed, and a business's webhook endpoint answers the webhook tool.
 */
describe('Tools against the built service (contract §26)', () => {
  let database: FreshDatabase;
  let fake: FakeOpenAI;
  let receiver: WebhookReceiver;
  let app: BuiltProcess;
  let api: HttpTarget;
  let metricsUrl: string;
  let tenant: Awaited<ReturnType<typeof tenantWithKey>>;
  let personalityId: string;
  let endpoint: { id: string; secret: string };
  const endpointPath = `tool/${randomUUID()}`;

  const lookup = {
    name: 'lookup_order',
    description: 'Looks up an order',
    parameters: {
      type: 'object',
      properties: { order_id: { type: 'string' } },
      required: ['order_id'],
      additionalProperties: false,
    },
    execution: 'client',
  };
  const lookupCalled = (args: string, id = 'call_1'): FakeReply => ({
    toolCalls: [{ id, name: 'lookup_order', arguments: args }],
    usage: { prompt_tokens: 10, completion_tokens: 5 },
  });
  const answer: FakeReply = { usage: { prompt_tokens: 20, completion_tokens: 7 } };
  const shipped = { status: 'shipped', eta: '2026-12-01' };

  async function personalityWith(auth: string, tools: unknown[]): Promise<string> {
    const created = await api
      .http()
      .post('/v1/personalities/from-catalog')
      .set('Authorization', auth)
      .send({ slug: 'sage-mentor', tools });
    expect(created.status).toBe(201);
    return created.body.id as string;
  }

  function respond(body: Record<string, unknown>, auth = tenant.auth) {
    return api
      .http()
      .post('/v1/respond')
      .set('Authorization', auth)
      .send({ personality_id: personalityId, user_id: uniqueUserId('built'), ...body });
  }

  function resume(turnId: string, body: Record<string, unknown>) {
    return api
      .http()
      .post(`/v1/respond/turns/${turnId}/tool-outputs`)
      .set('Authorization', tenant.auth)
      .send(body);
  }

  async function memoriesOf(userId: string) {
    const listed = await api
      .http()
      .get(`/v1/end-users/${userId}/memories`)
      .set('Authorization', tenant.auth);
    expect(listed.status).toBe(200);
    return listed.body.data as Array<{ content: string; tool_calls: unknown }>;
  }

  beforeAll(async () => {
    ensureBuilt();
    [database, fake, receiver] = await Promise.all([
      createFreshDatabase('tools_built', process.env.DATABASE_URL),
      FakeOpenAI.start({ apiKey: 'sk-provider-key' }),
      new WebhookReceiver().start(),
    ]);
    const [port, metricsPort] = await Promise.all([freePort(), freePort()]);
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    // The service migrates its empty database as it starts (MIGRATE_ON_START defaults to true).
    app = runBuilt('main.js', [], {
      ...rateLimitDefaults(),
      DATABASE_URL: database.url,
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      // Erasure as soon as it is asked for, so the last test sees it done.
      ERASURE_GRACE_SECONDS: '0',
      ERASURE_POLL_INTERVAL_MS: '200',
      RESPONSE_ENGINE: 'openai',
      OPENAI_BASE_URL: fake.url,
      OPENAI_API_KEY: 'sk-provider-key',
      OPENAI_MODEL: 'default-model',
      ENGINE_TIMEOUT_MS: '5000',
      ENGINE_BREAKER_FAILURES: '1000',
      TOOL_MAX_ROUNDS: '2',
      // The business's endpoint is the spec's receiver on loopback.
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_ALLOWED_PORTS: '1-65535',
    });
    await waitUntilReady(app, port);
    api = httpTo(`http://127.0.0.1:${port}`);

    tenant = await tenantWithKey(api, ['admin']);
    // Streamed deltas as the model sends them (output moderation's gate is safety's spec).
    await api
      .http()
      .patch(`/v1/organizations/${tenant.organizationId}/safety`)
      .set('Authorization', `Bearer ${tenant.accessToken}`)
      .send({ output_moderation: 'off' })
      .expect(200);
    endpoint = await createWebhookEndpoint(api, tenant.auth, receiver.url(endpointPath));
    personalityId = await personalityWith(tenant.auth, [
      lookup,
      {
        name: 'book',
        description: 'Books a slot',
        parameters: { type: 'object', properties: { at: { type: 'string' } } },
        execution: 'webhook',
        endpoint_id: endpoint.id,
      },
    ]);
  }, 180_000);

  afterEach(() => fake.reset());
  afterAll(async () => {
    await app?.stop();
    await Promise.all([fake?.close(), receiver?.stop()]);
    await database?.drop();
  });

  it("calls a webhook tool, signed, and gives its output to the model's next call", async () => {
    fake.respondWith(
      {
        toolCalls: [{ id: 'call_w', name: 'book', arguments: '{"at": "9:00"}' }],
        usage: { prompt_tokens: 10, completion_tokens: 5 },
      },
      answer,
    );
    const userId = uniqueUserId('built');
    const done = await respond({ user_id: userId, message: 'book me at nine' });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({
      status: 'completed',
      reply: { text: 'echo: book me at nine' },
    });

    const [hook] = receiver.at(`/${endpointPath}`);
    expect(verifiedEvent(hook, endpoint.secret)).toEqual({
      id: expect.stringMatching(/^evt_[0-9a-f]{32}$/),
      type: 'tool.call',
      created_at: expect.any(String),
      organization_id: tenant.organizationId,
      data: {
        tool_call_id: 'call_w',
        name: 'book',
        arguments: { at: '9:00' },
        user_id: userId,
        personality_id: personalityId,
        turn_id: expect.stringMatching(/^turn_[0-9A-HJKMNP-TV-Z]{26}$/),
      },
    });
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[1].body?.messages?.slice(-2)).toEqual([
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_w',
            type: 'function',
            function: { name: 'book', arguments: '{"at":"9:00"}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'call_w', content: '{"echo":{"at":"9:00"}}' },
    ]);
    const [reply] = await memoriesOf(userId);
    expect(reply.tool_calls).toEqual([
      {
        id: 'call_w',
        name: 'book',
        arguments: { at: '9:00' },
        output: { echo: { at: '9:00' } },
        execution: 'webhook',
        duration_ms: expect.any(Number),
        error: null,
      },
    ]);
  });

  for (const stream of [false, true]) {
    it(`pauses for a client tool and completes once its output is sent (${stream ? 'streamed' : 'plain'})`, async () => {
      fake.respondWith(lookupCalled('{"order_id": "A-1042"}'), answer);
      const userId = uniqueUserId('built');
      const paused = await respond({ user_id: userId, message: 'where is it?', stream });
      expect(paused.status).toBe(200);
      let pause: Record<string, unknown>;
      if (stream) {
        const events = parseEvents(paused.text);
        expect(events.map((event) => event.event)).toEqual(['tool_calls', 'done']);
        const announced = events[0].data as Record<string, unknown>;
        pause = events[1].data as Record<string, unknown>;
        expect(announced).toMatchObject({ turn_id: pause.turn_id, tool_calls: pause.tool_calls });
      } else {
        pause = paused.body as Record<string, unknown>;
      }
      expect(pause).toEqual({
        status: 'requires_action',
        turn_id: expect.stringMatching(/^turn_[0-9A-HJKMNP-TV-Z]{26}$/),
        tool_calls: [{ id: 'call_1', name: 'lookup_order', arguments: { order_id: 'A-1042' } }],
        personality_id: personalityId,
        user_id: userId,
      });
      expect(fake.requests[0].body?.tools).toEqual([
        expect.objectContaining({
          type: 'function',
          function: expect.objectContaining({ name: 'lookup_order', strict: true }),
        }),
        expect.objectContaining({ function: expect.objectContaining({ name: 'book' }) }),
      ]);

      const done = await resume(String(pause.turn_id), {
        outputs: [{ tool_call_id: 'call_1', output: shipped }],
        stream,
      });
      expect(done.status).toBe(200);
      if (stream) {
        const events = parseEvents(done.text);
        expect(events.filter((event) => event.event === 'delta').length).toBeGreaterThan(0);
        expect(events.at(-1)).toMatchObject({
          event: 'done',
          data: { status: 'completed', reply: { text: 'echo: where is it?' } },
        });
      } else {
        expect(done.body).toMatchObject({
          status: 'completed',
          reply: { text: 'echo: where is it?' },
        });
      }
      expect(fake.requests[1].body?.messages?.at(-1)).toEqual({
        role: 'tool',
        tool_call_id: 'call_1',
        content: JSON.stringify(shipped),
      });

      // The reply's memory keeps the call, in the list and in the export.
      const called = {
        id: 'call_1',
        name: 'lookup_order',
        arguments: { order_id: 'A-1042' },
        output: shipped,
        execution: 'client',
        duration_ms: null,
        error: null,
      };
      const memories = await memoriesOf(userId);
      expect(memories.map((memory) => [memory.content, memory.tool_calls])).toEqual([
        ['echo: where is it?', [called]],
        ['where is it?', null],
      ]);
      const exported = await api
        .http()
        .get(`/v1/end-users/${userId}/export`)
        .set('Authorization', tenant.auth);
      expect(exported.status).toBe(200);
      const document = JSON.parse(
        Buffer.isBuffer(exported.body) ? exported.body.toString() : exported.text,
      ) as {
        memories: Array<{ tool_calls?: unknown }>;
      };
      expect(document.memories.map((memory) => memory.tool_calls)).toEqual([null, [called]]);
    });
  }

  it('lets exactly one of concurrent resumptions win; the others get 409 turn_not_pending', async () => {
    fake.respondWith(lookupCalled('{"order_id": "C-3"}'));
    const userId = uniqueUserId('built');
    const paused = await respond({ user_id: userId, message: 'and C-3?' });
    expect(paused.body.status).toBe('requires_action');
    const outputs = [{ tool_call_id: 'call_1', output: shipped }];
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => resume(paused.body.turn_id as string, { outputs })),
    );
    expect(answers.map((answered) => answered.status).sort()).toEqual([
      200, 409, 409, 409, 409, 409,
    ]);
    for (const refused of answers.filter((answered) => answered.status === 409)) {
      expectError(refused, 409, 'turn_not_pending');
    }
    // The pause's call and the winner's: no loser reached the model.
    expect(fake.requests).toHaveLength(2);
    expect(await memoriesOf(userId)).toHaveLength(2);
  });

  it('asks without tools after TOOL_MAX_ROUNDS rounds', async () => {
    // Arguments that fail the schema go back to the model, so each round goes on to the next.
    fake.respondWith(
      lookupCalled('{"order_id": 1}', 'call_a'),
      lookupCalled('not json', 'call_b'),
      answer,
    );
    const done = await respond({ message: 'loop' });
    expect(done.body).toMatchObject({ status: 'completed', reply: { text: 'echo: loop' } });
    expect(fake.requests.map((request) => request.body?.tools !== undefined)).toEqual([
      true,
      true,
      false,
    ]);
    const toolMessages = fake.requests[2].body?.messages?.filter((m) => m.role === 'tool');
    expect(toolMessages?.map((message) => message.tool_call_id)).toEqual(['call_a', 'call_b']);
  });

  it('counts tool calls on METRICS_PORT by execution and outcome, never by tool name', async () => {
    const scrape = async () => parseExposition(await (await fetch(metricsUrl)).text());
    const before = await scrape();
    fake.respondWith(
      {
        toolCalls: [
          { id: 'call_w', name: 'book', arguments: '{"at": "10:00"}' },
          { id: 'call_x', name: 'no_such_tool', arguments: '{}' },
        ],
        usage: { prompt_tokens: 10, completion_tokens: 5 },
      },
      answer,
    );
    expect((await respond({ message: 'book two' })).body.status).toBe('completed');
    const after = await scrape();
    const added = (name: string, labels: Record<string, string>) =>
      valueOf(after, name, labels) - valueOf(before, name, labels);
    expect(added('tool_calls_total', { execution: 'webhook', outcome: 'ok' })).toBe(1);
    expect(added('tool_calls_total', { execution: 'client', outcome: 'invalid' })).toBe(1);
    expect(added('tool_call_duration_seconds_count', { execution: 'webhook' })).toBe(1);
    const toolSeries = after.samples.filter((sample) => sample.name.startsWith('tool_call'));
    for (const sample of toolSeries) {
      expect(Object.keys(sample.labels).sort()).toEqual(
        sample.name === 'tool_calls_total'
          ? ['execution', 'outcome']
          : expect.arrayContaining(['execution']),
      );
    }
  });

  it("erases an end user's paused turn and the tool calls of their replies", async () => {
    const userId = uniqueUserId('built-erased');
    fake.respondWith(lookupCalled('{"order_id": "E-1"}'), answer);
    const first = await respond({ user_id: userId, message: 'first' });
    await resume(first.body.turn_id as string, {
      outputs: [{ tool_call_id: 'call_1', output: shipped }],
    }).expect(200);
    fake.respondWith(lookupCalled('{"order_id": "E-2"}'));
    const paused = await respond({ user_id: userId, message: 'second' });
    expect(paused.body.status).toBe('requires_action');
    expect((await memoriesOf(userId)).some((memory) => memory.tool_calls !== null)).toBe(true);

    await api
      .http()
      .delete(`/v1/end-users/${userId}`)
      .set('Authorization', tenant.auth)
      .expect(202);
    await eventually(async () => {
      const got = await api.http().get(`/v1/end-users/${userId}`).set('Authorization', tenant.auth);
      return got.status === 404 ? true : undefined;
    }, 'the end user erased');
    // The paused turn went with them: its outputs now find no turn.
    const late = await resume(paused.body.turn_id as string, {
      outputs: [{ tool_call_id: 'call_1', output: shipped }],
    });
    expectError(late, 404, 'not_found');
  });

  it('ends a turn whose tokens spend the budget mid-way with 402', async () => {
    const other = await tenantWithKey(api, ['read_write']);
    const otherPersonality = await personalityWith(other.auth, [lookup]);
    await api
      .http()
      .patch(`/v1/organizations/${other.organizationId}/limits`)
      .set('Authorization', `Bearer ${other.accessToken}`)
      .send({ monthly_token_budget: 5000 })
      .expect(200);
    // The first call's arguments fail the schema, so the turn would ask the model again.
    fake.respondWith({
      ...lookupCalled('not json'),
      usage: { prompt_tokens: 6000, completion_tokens: 5 },
    });
    const refused = await respond({ personality_id: otherPersonality, message: 'go' }, other.auth);
    expectError(refused, 402, 'budget_exceeded');
    expect(refused.body.error.details).toMatchObject({ scope: 'organization', limit: 5000 });
    expect(fake.requests).toHaveLength(1);
  });
});
