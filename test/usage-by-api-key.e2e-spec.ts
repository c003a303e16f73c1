import { randomUUID } from 'node:crypto';
import { expectError } from './support/assertions';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { FakeOpenAI, fakeModelEnv } from './support/fake-openai';
import { createApiKey, signUp } from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';

/**
 * GET /v1/usage/breakdown?group_by=api_key (contract §28: the console's usage by key): the key
 * that asked for each reply, most tokens first, and the replies made with users' access tokens
 * as the last item, `key: null`.
 */
describe('Usage by API key', () => {
  let fake: FakeOpenAI;
  let t: TestApp;

  beforeAll(async () => {
    fake = await FakeOpenAI.start();
    fake.respondAlwaysWith({ usage: { prompt_tokens: 100, completion_tokens: 50 } });
    t = await createTestApp({
      env: {
        ...fakeModelEnv(fake),
        ENGINE_TIMEOUT_MS: '5000',
      },
    });
  });
  afterAll(async () => {
    await t.close();
    await fake.close();
  });

  it('counts each reply under the key that asked for it, signed-in users last, paged by key id', async () => {
    const owner = await signUp(t);
    const keys = await Promise.all(
      ['one', 'two', 'three'].map(async (name) => {
        const listed = await t
          .http()
          .post('/v1/api-keys')
          .set('Authorization', `Bearer ${owner.accessToken}`)
          .send({ name, scopes: ['read_write'] });
        return { id: listed.body.id as string, auth: `Bearer ${listed.body.key}` };
      }),
    );
    const personalityId = await clonePersonality(t, keys[0].auth);
    const reply = async (auth: string) => {
      const answer = await t
        .http()
        .post('/v1/respond')
        .set('Authorization', auth)
        .send({ personality_id: personalityId, user_id: uniqueUserId(), message: 'hi' });
      expect(answer.status).toBe(200);
    };
    // Key two: 3 replies, key one: 2, the owner's own token: 4 (more than any key), key three: 1.
    for (const [auth, count] of [
      [keys[1].auth, 3],
      [keys[0].auth, 2],
      [`Bearer ${owner.accessToken}`, 4],
      [keys[2].auth, 1],
    ] as const) {
      await Promise.all(Array.from({ length: count }, () => reply(auth)));
    }
    const month = new Date().toISOString().slice(0, 7);
    const get = (query: string) =>
      t
        .http()
        .get(`/v1/usage/breakdown?month=${month}&group_by=api_key${query}`)
        .set('Authorization', keys[0].auth);
    const item = (key: string | null, replies: number) => ({
      key,
      requests: replies,
      prompt_tokens: 100 * replies,
      completion_tokens: 50 * replies,
      cached_tokens: 0,
    });
    const all = await get('');
    expect(all.status).toBe(200);
    expect(all.body).toEqual({
      month,
      group_by: 'api_key',
      data: [item(keys[1].id, 3), item(keys[0].id, 2), item(keys[2].id, 1), item(null, 4)],
      has_more: false,
    });
    // Every page ends on a key a cursor can name; the signed-in users' item comes last.
    const first = await get('&limit=2');
    expect(first.body.data).toEqual([item(keys[1].id, 3), item(keys[0].id, 2)]);
    expect(first.body.has_more).toBe(true);
    const second = await get(`&limit=1&starting_after=${keys[0].id}`);
    expect(second.body.data).toEqual([item(keys[2].id, 1)]);
    expect(second.body.has_more).toBe(true);
    const last = await get(`&limit=1&starting_after=${keys[2].id}`);
    expect(last.body).toMatchObject({ data: [item(null, 4)], has_more: false });
    // The month's totals agree with the keys' sum.
    const tokens = await t
      .http()
      .get(`/v1/usage/tokens?month=${month}`)
      .set('Authorization', keys[0].auth);
    expect(tokens.body).toMatchObject({
      requests: 10,
      prompt_tokens: 1000,
      completion_tokens: 500,
    });

    // A revoked key's tokens stay counted.
    await t
      .http()
      .delete(`/v1/api-keys/${keys[1].id}`)
      .set('Authorization', `Bearer ${owner.accessToken}`);
    expect((await get('')).body.data[0]).toEqual(item(keys[1].id, 3));

    // Another organization sees none of it; a bad cursor is a 400.
    const other = await signUp(t);
    const otherKey = `Bearer ${await createApiKey(t, other.accessToken, ['read'])}`;
    const foreign = await t
      .http()
      .get(`/v1/usage/breakdown?month=${month}&group_by=api_key`)
      .set('Authorization', otherKey);
    expect(foreign.body.data).toEqual([]);
    expectError(await get('&starting_after=not-a-key'), 400, 'validation_failed');
    expect((await get(`&starting_after=${randomUUID()}`)).body).toMatchObject({
      data: [item(null, 4)],
    });
  });
});
