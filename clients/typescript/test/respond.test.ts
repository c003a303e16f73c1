import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { PersonalityApiError, type RespondStreamEvent } from '@personality-api/client';
import {
  newPersonality,
  newTenant,
  uniqueUserId,
  withoutOutputModeration,
  type Tenant,
} from './support.js';

describe('respond and respondStream', () => {
  let tenant: Tenant;
  let personalityId: string;
  before(async () => {
    tenant = await newTenant();
    await withoutOutputModeration(tenant);
    personalityId = await newPersonality(tenant.api);
  });

  it('respond answers the reply, and creates the end user', async () => {
    const userId = uniqueUserId('respond');
    const answer = await tenant.api.respond({
      personality_id: personalityId,
      user_id: userId,
      message: 'I finally got the job!',
    });
    assert.equal(answer.status, 'completed');
    if (answer.status !== 'completed') return;
    assert.equal(answer.user_id, userId);
    assert.equal(answer.personality_id, personalityId);
    assert.match(answer.reply.text, /.+/);
    assert.equal(typeof answer.reply.emotion.name, 'string');
    assert.ok(answer.reply.emotion.intensity >= 0 && answer.reply.emotion.intensity <= 1);
    const user = await tenant.api.GET('/v1/end-users/{user_id}', {
      params: { path: { user_id: userId } },
    });
    assert.equal(user.response.status, 200);
  });

  it('respondStream yields deltas, then done with the same answer a plain call gives', async () => {
    const events: RespondStreamEvent[] = [];
    for await (const event of tenant.api.respondStream({
      personality_id: personalityId,
      user_id: uniqueUserId('stream'),
      message: 'Tell me something about the sea',
    })) {
      events.push(event);
    }
    const deltas = events.filter((event) => event.type === 'delta');
    assert.ok(deltas.length > 1, `${deltas.length} delta events`);
    const last = events.at(-1);
    assert.equal(last?.type, 'done');
    assert.equal(events.filter((event) => event.type === 'done').length, 1);
    if (last?.type !== 'done' || last.answer.status !== 'completed') return;
    assert.equal(deltas.map((event) => event.text).join(''), last.answer.reply.text);
    assert.equal(typeof last.answer.vocabulary_version, 'string');
  });

  it('a turn paused for client tools: tool_calls and requires_action, resumed by submitToolOutputs', async () => {
    const withTool = await newPersonality(tenant.api);
    const patched = await tenant.api.PATCH('/v1/personalities/{id}', {
      params: { path: { id: withTool } },
      body: {
        tools: [
          {
            name: 'lookup_order',
            description: 'Looks up an order',
            parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
            execution: 'client',
          },
        ],
      },
    });
    assert.equal(patched.response.status, 200);
    const body = {
      personality_id: withTool,
      user_id: uniqueUserId('tools'),
      message: 'Where is it? lookup_order({"order_id": "A-1"})',
    };
    const paused = await tenant.api.respond(body);
    assert.equal(paused.status, 'requires_action');
    if (paused.status !== 'requires_action') return;
    assert.deepEqual(
      paused.tool_calls.map((call) => [call.name, call.arguments]),
      [['lookup_order', { order_id: 'A-1' }]],
    );
    const done = await tenant.api.submitToolOutputs(
      paused.turn_id,
      paused.tool_calls.map((call) => ({ tool_call_id: call.id, output: { status: 'shipped' } })),
    );
    assert.equal(done.status, 'completed');
    if (done.status === 'completed') assert.match(done.reply.text, /.+/);

    const events: RespondStreamEvent[] = [];
    for await (const event of tenant.api.respondStream(body)) events.push(event);
    assert.deepEqual(
      events.map((event) => event.type),
      ['tool_calls', 'done'],
    );
    const [calls, last] = events;
    if (calls?.type !== 'tool_calls' || last?.type !== 'done') return;
    assert.equal(last.answer.status, 'requires_action');
    if (last.answer.status === 'requires_action') assert.equal(calls.turnId, last.answer.turn_id);
  });

  it('a streamed call repeated with its Idempotency-Key gets the stored answer as done', async () => {
    const body = { personality_id: personalityId, user_id: uniqueUserId('replay'), message: 'hi' };
    const idempotencyKey = randomUUID();
    const first: RespondStreamEvent[] = [];
    for await (const event of tenant.api.respondStream(body, { idempotencyKey })) first.push(event);
    const replay: RespondStreamEvent[] = [];
    for await (const event of tenant.api.respondStream(body, { idempotencyKey }))
      replay.push(event);
    assert.deepEqual(replay, [first.at(-1)]);
  });

  it('leaving the loop early ends the stream; the signal aborts one', async () => {
    const body = { personality_id: personalityId, message: 'Tell me a long story' };
    for await (const event of tenant.api.respondStream({ ...body, user_id: uniqueUserId('b') })) {
      assert.equal(event.type, 'delta');
      break;
    }
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(
      async () => {
        for await (const _ of tenant.api.respondStream(
          { ...body, user_id: uniqueUserId('c') },
          { signal: controller.signal },
        ));
      },
      { name: 'AbortError' },
    );
  });

  it('throws PersonalityApiError: 404 for a personality of no one, 409 under deletion', async () => {
    const userId = uniqueUserId('gone');
    const unknown = await tenant.api
      .respond({ personality_id: randomUUID(), user_id: userId, message: 'hello?' })
      .then(
        () => assert.fail('no error'),
        (error: unknown) => error,
      );
    assert.ok(unknown instanceof PersonalityApiError);
    assert.equal(unknown.status, 404);
    assert.equal(unknown.code, 'not_found');
    assert.match(unknown.requestId ?? '', /^[0-9A-HJKMNP-TV-Z]{26}$/);

    await tenant.api.POST('/v1/end-users', { body: { user_id: userId } });
    await tenant.api.DELETE('/v1/end-users/{user_id}', { params: { path: { user_id: userId } } });
    const body = { personality_id: personalityId, user_id: userId, message: 'still there?' };
    await assert.rejects(tenant.api.respond(body), {
      name: 'PersonalityApiError',
      status: 409,
      code: 'end_user_under_deletion',
    });
    await assert.rejects(
      async () => {
        for await (const _ of tenant.api.respondStream(body));
      },
      (error: unknown) =>
        error instanceof PersonalityApiError &&
        error.status === 409 &&
        error.code === 'end_user_under_deletion' &&
        error.requestId !== null,
    );
  });
});
