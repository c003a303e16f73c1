import { DataSource } from 'typeorm';
import { expectError, expectRequestId } from './support/assertions';
import { clonePersonality, respond, uniqueUserId } from './support/data-plane';
import { tenantWithKey } from './support/identity';
import { createTestApp, TestApp } from './support/test-app';

describe('End users: the five rules of POST /v1/end-users, list, get, patch', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenantWithKey>>;

  beforeAll(async () => {
    // A long grace period: erasure itself is tested in erasure.e2e-spec.ts.
    t = await createTestApp({ env: { ERASURE_GRACE_SECONDS: '3600' } });
    a = await tenantWithKey(t, ['read_write']);
  });
  afterAll(() => t.close());

  const create = (body: object, auth = a.auth) =>
    t.http().post('/v1/end-users').set('Authorization', auth).send(body);

  it('rule 1: a new user_id answers 201 with the record', async () => {
    const userId = uniqueUserId();
    const response = await create({ user_id: userId, metadata: { plan: 'pro', n: 1 } });
    expect(response.status).toBe(201);
    expectRequestId(response);
    expect(response.body).toEqual({
      user_id: userId,
      metadata: { plan: 'pro', n: 1 },
      status: 'active',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: expect.any(String),
    });
  });

  it('rule 2: an existing user_id answers 200 with the stored record, metadata ignored', async () => {
    const userId = uniqueUserId();
    const first = await create({ user_id: userId, metadata: { v: 1 } });
    const again = await create({ user_id: userId, metadata: { v: 2 } });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    const stored = await t.http().get(`/v1/end-users/${userId}`).set('Authorization', a.auth);
    expect(stored.body.metadata).toEqual({ v: 1 });
  });

  it('rule 3: a user_id under deletion answers 409 end_user_under_deletion with the expected end', async () => {
    const userId = uniqueUserId();
    await create({ user_id: userId });
    const deleted = await t.http().delete(`/v1/end-users/${userId}`).set('Authorization', a.auth);
    expect(deleted.status).toBe(202);
    expect(deleted.body).toEqual({
      user_id: userId,
      status: 'deleting',
      erasure_expected_at: expect.any(String),
    });
    expect(Date.parse(deleted.body.erasure_expected_at)).toBeGreaterThan(Date.now() + 3_500_000);

    const again = await create({ user_id: userId });
    expectError(again, 409, 'end_user_under_deletion');
    expect(again.body.error.erasure_expected_at).toBe(deleted.body.erasure_expected_at);

    const got = await t.http().get(`/v1/end-users/${userId}`).set('Authorization', a.auth);
    expect(got.status).toBe(200);
    expect(got.body.status).toBe('deleting');

    // DELETE again keeps the first schedule; PATCH is refused while deleting.
    const twice = await t.http().delete(`/v1/end-users/${userId}`).set('Authorization', a.auth);
    expect(twice.status).toBe(202);
    expect(twice.body.erasure_expected_at).toBe(deleted.body.erasure_expected_at);
    expectError(
      await t
        .http()
        .patch(`/v1/end-users/${userId}`)
        .set('Authorization', a.auth)
        .send({ metadata: {} }),
      409,
      'end_user_under_deletion',
    );
  });

  it('rule 4: needs read_write; read answers 403, no credential 401', async () => {
    const reader = await tenantWithKey(t, ['read']);
    expectError(await create({ user_id: uniqueUserId() }, reader.auth), 403, 'insufficient_scope');
    expectError(
      await t.http().post('/v1/end-users').send({ user_id: uniqueUserId() }),
      401,
      'unauthenticated',
    );
    // read is enough for GETs
    const list = await t.http().get('/v1/end-users').set('Authorization', reader.auth);
    expect(list.status).toBe(200);
    expectError(
      await t
        .http()
        .patch(`/v1/end-users/x`)
        .set('Authorization', reader.auth)
        .send({ metadata: {} }),
      403,
      'insufficient_scope',
    );
    expectError(
      await t.http().delete(`/v1/end-users/x`).set('Authorization', reader.auth),
      403,
      'insufficient_scope',
    );
  });

  it('rule 5: explicit creation after /v1/respond finds the same record (200)', async () => {
    const personalityId = await clonePersonality(t, a.auth);
    const userId = uniqueUserId();
    const talked = await respond(t, a.auth, {
      personality_id: personalityId,
      user_id: userId,
      message: 'hello',
    });
    expect(talked.status).toBe(200);
    const created = await create({ user_id: userId, metadata: { late: true } });
    expect(created.status).toBe(200);
    expect(created.body.metadata).toEqual({});
  });

  it('50 concurrent creates of one user_id: one 201, 49 × 200, one row', async () => {
    const userId = uniqueUserId('race');
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) => create({ user_id: userId, metadata: { i } })),
    );
    const statuses = responses.map((response) => response.status).sort();
    expect(statuses.filter((status) => status === 201)).toHaveLength(1);
    expect(statuses.filter((status) => status === 200)).toHaveLength(49);
    const winner = responses.find((response) => response.status === 201)!;
    for (const response of responses) expect(response.body).toEqual(winner.body);
    const rows = await t.app
      .get(DataSource)
      .query('SELECT count(*)::int AS n FROM end_users WHERE user_id = $1', [userId]);
    expect(rows[0].n).toBe(1);
  });

  it('a mix of 25 creates and 25 /v1/respond calls for one new user_id share one row', async () => {
    const personalityId = await clonePersonality(t, a.auth);
    const userId = uniqueUserId('mix');
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        i % 2 === 0
          ? create({ user_id: userId })
          : respond(t, a.auth, {
              personality_id: personalityId,
              user_id: userId,
              message: `m${i}`,
            }),
      ),
    );
    const creates = responses.filter((_, i) => i % 2 === 0).map((response) => response.status);
    const responds = responses.filter((_, i) => i % 2 === 1).map((response) => response.status);
    expect(responds).toEqual(Array(25).fill(200));
    expect(creates.every((status) => status === 200 || status === 201)).toBe(true);
    expect(creates.filter((status) => status === 201).length).toBeLessThanOrEqual(1);
    const rows = await t.app.get(DataSource).query(
      `SELECT count(*)::int AS n,
                (SELECT count(*)::int FROM memories m JOIN end_users e ON e.id = m.end_user_id
                  WHERE e.user_id = $1) AS memories
           FROM end_users WHERE user_id = $1`,
      [userId],
    );
    expect(rows[0]).toEqual({ n: 1, memories: 50 });
  });

  it('validates user_id and metadata (400 validation_failed naming the field)', async () => {
    const cases: Array<[object, string]> = [
      [{}, 'user_id'],
      [{ user_id: '' }, 'user_id'],
      [{ user_id: 'x'.repeat(257) }, 'user_id'],
      [{ user_id: 'tab\there' }, 'user_id'],
      [{ user_id: 'nul\u0000' }, 'user_id'],
      [{ user_id: 42 }, 'user_id'],
      // A URL path drops them: `/v1/end-users/./facts` reached `facts` (review).
      [{ user_id: '.' }, 'user_id'],
      [{ user_id: '..' }, 'user_id'],
      [{ user_id: 'ok', metadata: [1, 2] }, 'metadata'],
      [{ user_id: 'ok', metadata: 'text' }, 'metadata'],
      [{ user_id: 'ok', metadata: { big: 'x'.repeat(16 * 1024) } }, 'metadata'],
      [{ user_id: 'ok', role: 'admin' }, 'role'],
    ];
    for (const [body, field] of cases) {
      const response = await create(body);
      expectError(response, 400, 'validation_failed');
      expect(response.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    // Limits are inclusive: 256 characters (emoji count once) and 16 KiB of JSON.
    const emoji = '😀'.repeat(256);
    expect((await create({ user_id: emoji })).status).toBe(201);
    const fits = { v: 'x'.repeat(16 * 1024 - 8) };
    expect(JSON.stringify(fits).length).toBe(16 * 1024);
    expect((await create({ user_id: uniqueUserId(), metadata: fits })).status).toBe(201);
  });

  it('lists end users by user_id with cursor paging', async () => {
    const tenant = await tenantWithKey(t, ['read_write']);
    const ids = ['c', 'a', 'e', 'b', 'd'];
    for (const id of ids) await create({ user_id: id }, tenant.auth);
    const page1 = await t.http().get('/v1/end-users?limit=2').set('Authorization', tenant.auth);
    expect(page1.status).toBe(200);
    expect(page1.body.data.map((u: { user_id: string }) => u.user_id)).toEqual(['a', 'b']);
    expect(page1.body.has_more).toBe(true);
    const page2 = await t
      .http()
      .get('/v1/end-users?limit=2&starting_after=b')
      .set('Authorization', tenant.auth);
    expect(page2.body.data.map((u: { user_id: string }) => u.user_id)).toEqual(['c', 'd']);
    const page3 = await t
      .http()
      .get('/v1/end-users?limit=2&starting_after=d')
      .set('Authorization', tenant.auth);
    expect(page3.body).toEqual({
      data: [expect.objectContaining({ user_id: 'e' })],
      has_more: false,
    });
    expectError(
      await t.http().get('/v1/end-users?limit=0').set('Authorization', tenant.auth),
      400,
      'validation_failed',
    );
    // A cursor may be any valid user_id, 256 emoji included.
    const emoji = '😀'.repeat(256);
    await create({ user_id: emoji }, tenant.auth);
    const afterEmoji = await t
      .http()
      .get(`/v1/end-users?starting_after=${encodeURIComponent(emoji)}`)
      .set('Authorization', tenant.auth);
    expect(afterEmoji.status).toBe(200);
  });

  it('PATCH replaces metadata; GET reads it; unknown user_id answers 404', async () => {
    const userId = uniqueUserId();
    await create({ user_id: userId, metadata: { a: 1 } });
    const patched = await t
      .http()
      .patch(`/v1/end-users/${encodeURIComponent(userId)}`)
      .set('Authorization', a.auth)
      .send({ metadata: { b: 2 } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ user_id: userId, metadata: { b: 2 }, status: 'active' });
    const got = await t.http().get(`/v1/end-users/${userId}`).set('Authorization', a.auth);
    expect(got.body).toEqual(patched.body);
    expectError(
      await t
        .http()
        .patch(`/v1/end-users/${userId}`)
        .set('Authorization', a.auth)
        .send({ metadata: null }),
      400,
      'validation_failed',
    );
    expectError(
      await t.http().get(`/v1/end-users/${uniqueUserId()}`).set('Authorization', a.auth),
      404,
      'not_found',
    );
    expectError(
      await t.http().delete(`/v1/end-users/${uniqueUserId()}`).set('Authorization', a.auth),
      404,
      'not_found',
    );
  });

  it('user_ids with spaces, slashes and unicode round-trip through the path', async () => {
    const userId = `ä ö/${uniqueUserId()}?#`;
    expect((await create({ user_id: userId })).status).toBe(201);
    const got = await t
      .http()
      .get(`/v1/end-users/${encodeURIComponent(userId)}`)
      .set('Authorization', a.auth);
    expect(got.status).toBe(200);
    expect(got.body.user_id).toBe(userId);
  });

  it('tenant isolation: organization B gets 404 for A’s user_id and its own row on create', async () => {
    const b = await tenantWithKey(t, ['read_write']);
    const userId = uniqueUserId();
    await create({ user_id: userId, metadata: { owner: 'a' } });
    for (const request of [
      t.http().get(`/v1/end-users/${userId}`),
      t.http().patch(`/v1/end-users/${userId}`).send({ metadata: {} }),
      t.http().delete(`/v1/end-users/${userId}`),
      t.http().get(`/v1/end-users/${userId}/export`),
      t.http().get(`/v1/end-users/${userId}/model`),
    ]) {
      expectError(await request.set('Authorization', b.auth), 404, 'not_found');
    }
    const list = await t.http().get('/v1/end-users').set('Authorization', b.auth);
    expect(list.body).toEqual({ data: [], has_more: false });
    // The same user_id in B is B's own new record.
    const own = await create({ user_id: userId }, b.auth);
    expect(own.status).toBe(201);
    expect(own.body.metadata).toEqual({});
  });
});
