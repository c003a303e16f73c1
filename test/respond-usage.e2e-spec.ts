import { DataSource } from 'typeorm';
import { expectError, expectRequestId } from './support/assertions';
import { clonePersonality, respond, uniqueUserId } from './support/data-plane';
import { tenantWithKey } from './support/identity';
import { createTestApp, TestApp } from './support/test-app';

describe('POST /v1/respond and usage', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenantWithKey>>;
  const month = new Date().toISOString().slice(0, 7);

  beforeAll(async () => {
    t = await createTestApp({ env: { ERASURE_GRACE_SECONDS: '3600' } });
    a = await tenantWithKey(t, ['read_write']);
  });
  afterAll(() => t.close());

  it('creates the end user, replies with an emotion of the latest vocabulary, remembers, counts', async () => {
    const tenant = await tenantWithKey(t, ['read_write']);
    const personalityId = await clonePersonality(t, tenant.auth, 'sunny-coach');
    const userId = uniqueUserId();
    const first = await respond(t, tenant.auth, {
      personality_id: personalityId,
      user_id: userId,
      message: 'I am SO happy, I finally got the job!!',
    });
    expect(first.status).toBe(200);
    expectRequestId(first);
    expect(first.body).toEqual({
      personality_id: personalityId,
      user_id: userId,
      reply: {
        text: expect.stringContaining("Hey, I'm Sunny, your coach!"),
        emotion: { name: 'joy', intensity: expect.any(Number) },
      },
      model: null,
      vocabulary_version: '2.0.0',
      safety: { flagged: false, categories: [], action: 'none' },
      // The organization has no knowledge documents: nothing to cite.
      citations: [],
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      status: 'completed',
    });
    expect(first.body.reply.text).toContain('joy');
    expect(first.body.reply.emotion.intensity).toBeGreaterThan(0);
    expect(first.body.reply.emotion.intensity).toBeLessThanOrEqual(1);

    const user = await t.http().get(`/v1/end-users/${userId}`).set('Authorization', tenant.auth);
    expect(user.status).toBe(200);

    // The second reply recalls the first message and detects a negative emotion.
    const second = await respond(t, tenant.auth, {
      personality_id: personalityId,
      user_id: userId,
      message: 'Now I am scared and nervous about the first day',
    });
    expect(second.status).toBe(200);
    expect(['fear', 'nervousness']).toContain(second.body.reply.emotion.name);
    expect(second.body.reply.text).toContain('I am SO happy, I finally got the job!!');
    expect(second.body.reply.text).not.toContain("I'm Sunny");

    // Memories: both messages and both replies, in order, with emotions.
    const model = await t
      .http()
      .get(`/v1/end-users/${userId}/model`)
      .set('Authorization', tenant.auth);
    expect(model.status).toBe(200);
    const memories = model.body.tables.memories;
    expect(memories.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([
      ['user', 'I am SO happy, I finally got the job!!'],
      ['personality', first.body.reply.text],
      ['user', 'Now I am scared and nervous about the first day'],
      ['personality', second.body.reply.text],
    ]);
    expect(memories[0]).toMatchObject({ emotion: 'joy', vocabulary_version: '2.0.0' });
    expect(model.body.tables.relationship_months).toHaveLength(1);
    expect(model.body.tables.end_users[0]).toMatchObject({ user_id: userId, status: 'active' });

    const usage = await t
      .http()
      .get(`/v1/usage/active-relationships?month=${month}`)
      .set('Authorization', tenant.auth);
    expect(usage.body).toEqual({ month, active_relationships: 1 });
  });

  it('is deterministic: the same conversation gets the same reply', async () => {
    const personalityId = await clonePersonality(t, a.auth, 'pip-playful');
    const message = 'lol that was hilarious, haha';
    const one = await respond(t, a.auth, {
      personality_id: personalityId,
      user_id: uniqueUserId(),
      message,
    });
    const two = await respond(t, a.auth, {
      personality_id: personalityId,
      user_id: uniqueUserId(),
      message,
    });
    expect(one.body.reply).toEqual(two.body.reply);
    expect(one.body.reply.emotion.name).toBe('amusement');
  });

  it('404 for a personality outside the organization, without creating the end user', async () => {
    const b = await tenantWithKey(t, ['read_write']);
    const foreign = await clonePersonality(t, b.auth);
    const userId = uniqueUserId();
    expectError(
      await respond(t, a.auth, { personality_id: foreign, user_id: userId, message: 'hi' }),
      404,
      'not_found',
    );
    expectError(
      await t.http().get(`/v1/end-users/${userId}`).set('Authorization', a.auth),
      404,
      'not_found',
    );
  });

  it('409 while the user is under deletion; 400 for bad bodies; 403 for read keys', async () => {
    const personalityId = await clonePersonality(t, a.auth);
    const userId = uniqueUserId();
    await respond(t, a.auth, { personality_id: personalityId, user_id: userId, message: 'hi' });
    await t.http().delete(`/v1/end-users/${userId}`).set('Authorization', a.auth);
    const refused = await respond(t, a.auth, {
      personality_id: personalityId,
      user_id: userId,
      message: 'hi again',
    });
    expectError(refused, 409, 'end_user_under_deletion');
    expect(refused.body.error.erasure_expected_at).toEqual(expect.any(String));

    for (const body of [
      { personality_id: 'nope', user_id: 'u', message: 'hi' },
      { personality_id: personalityId, user_id: '', message: 'hi' },
      { personality_id: personalityId, user_id: 'u', message: '' },
      // Blank: a paid model call for nothing, and an empty turn in the history (review).
      { personality_id: personalityId, user_id: 'u', message: ' \n\t\u200b ' },
      { personality_id: personalityId, user_id: 'u', message: 'x'.repeat(8001) },
      { personality_id: personalityId, user_id: 'u' },
      { personality_id: personalityId, user_id: 'u', message: 'hi', extra: true },
    ]) {
      expectError(
        await t.http().post('/v1/respond').set('Authorization', a.auth).send(body),
        400,
        'validation_failed',
      );
    }
    const reader = await tenantWithKey(t, ['read']);
    expectError(
      await respond(t, reader.auth, { personality_id: personalityId, user_id: 'u', message: 'hi' }),
      403,
      'insufficient_scope',
    );
  });

  it('counts distinct (end user, personality) pairs per month, across repeats and races', async () => {
    const tenant = await tenantWithKey(t, ['read_write']);
    const personalities = [
      await clonePersonality(t, tenant.auth, 'sage-mentor'),
      await clonePersonality(t, tenant.auth, 'willow-listener'),
    ];
    const users = [uniqueUserId('u1'), uniqueUserId('u2'), uniqueUserId('u3')];
    // 3 users × 2 personalities, each pair 3 times, all at once: 6 relationships.
    const calls = users.flatMap((user_id) =>
      personalities.flatMap((personality_id) =>
        [1, 2, 3].map((n) =>
          respond(t, tenant.auth, { personality_id, user_id, message: `m${n}` }),
        ),
      ),
    );
    const statuses = (await Promise.all(calls)).map((response) => response.status);
    expect(statuses).toEqual(Array(18).fill(200));

    const usage = await t
      .http()
      .get('/v1/usage/active-relationships')
      .set('Authorization', tenant.auth);
    expect(usage.body).toEqual({ month, active_relationships: 6 });
    const [{ n }] = await t.app.get(DataSource).query(
      `SELECT count(DISTINCT (end_user_id, personality_id))::int AS n FROM memories
          WHERE organization_id = $1`,
      [tenant.organizationId],
    );
    expect(n).toBe(6);

    // Items: the counted pairs, paged.
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await t
        .http()
        .get(
          `/v1/usage/active-relationships/items?month=${month}&limit=4${cursor ? `&starting_after=${encodeURIComponent(cursor)}` : ''}`,
        )
        .set('Authorization', tenant.auth);
      expect(page.status).toBe(200);
      seen.push(...page.body.data.map((item: { id: string }) => item.id));
      if (!page.body.has_more) break;
      cursor = page.body.data.at(-1).id;
    }
    expect(seen).toHaveLength(6);
    expect(new Set(seen).size).toBe(6);
    for (const user of users)
      for (const personality of personalities) expect(seen).toContain(`${personality}:${user}`);

    // Another organization's usage is its own.
    const other = await tenantWithKey(t, ['read']);
    const none = await t
      .http()
      .get('/v1/usage/active-relationships')
      .set('Authorization', other.auth);
    expect(none.body).toEqual({ month, active_relationships: 0 });
  });

  it('a month without activity answers 0; bad months answer 400', async () => {
    const ok = await t
      .http()
      .get('/v1/usage/active-relationships?month=2001-01')
      .set('Authorization', a.auth);
    expect(ok.body).toEqual({ month: '2001-01', active_relationships: 0 });
    const items = await t
      .http()
      .get('/v1/usage/active-relationships/items?month=2001-01')
      .set('Authorization', a.auth);
    expect(items.body).toEqual({ data: [], has_more: false });
    for (const bad of ['2026-13', 'abc', '2026-1', '2026-00', '26-01', '2026-01-01', '']) {
      const response = await t
        .http()
        .get(`/v1/usage/active-relationships?month=${bad}`)
        .set('Authorization', a.auth);
      expectError(response, 400, 'validation_failed');
      expect(response.body.error.details[0].field).toBe('month');
    }
    expectError(
      await t
        .http()
        .get('/v1/usage/active-relationships/items?starting_after=garbage')
        .set('Authorization', a.auth),
      400,
      'validation_failed',
    );
    expectError(await t.http().get('/v1/usage/active-relationships'), 401, 'unauthenticated');
  });
});
