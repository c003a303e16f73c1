import { expectError, expectRequestId } from './support/assertions';
import { createApiKey, signUp, tenantWithKey, uniqueEmail } from './support/identity';
import { createTestApp, TestApp } from './support/test-app';

describe('Authentication core: sign-up, access tokens, API keys, deny by default', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('signs up a user with a first organization they own', async () => {
    const email = uniqueEmail();
    const response = await t
      .http()
      .post('/v1/auth/signup')
      .send({ email, password: 'a long enough password' });
    expect(response.status).toBe(201);
    expectRequestId(response);
    expect(response.body).toMatchObject({
      user: { email, id: expect.any(String) },
      organization: { role: 'owner', id: expect.any(String) },
      token_type: 'Bearer',
      expires_in: expect.any(Number),
    });
    const organizations = await t
      .http()
      .get('/v1/organizations')
      .set('Authorization', `Bearer ${response.body.access_token}`);
    expect(organizations.status).toBe(200);
    expect(organizations.body).toEqual({
      data: [
        {
          id: response.body.organization.id,
          name: expect.any(String),
          role: 'owner',
          memory_retention_days: null,
          created_at: expect.any(String),
        },
      ],
      has_more: false,
    });
  });

  it('refuses a second sign-up with the same e-mail in any case: 409 email_taken', async () => {
    const email = uniqueEmail();
    await signUp(t, { email });
    const again = await t
      .http()
      .post('/v1/auth/signup')
      .send({ email: email.toUpperCase(), password: 'another long password' });
    expectError(again, 409, 'email_taken');
  });

  // An address that stands for another's where addresses meet (lower(), mail systems) would take
  // it: its owner would meet email_taken, and the reset mail go to the lookalike spelling.
  it.each([
    // U+212A KELVIN SIGN lowers to k.
    ['a character whose lower case is ASCII', 'kate', '\u212A', 'U+212A'],
    // The database's lower() maps U+212B ANGSTROM SIGN to å.
    ['one that Unicode normalization rewrites', '\u00e5sa', '\u212B', 'NFKC'],
  ])('refuses an address with %s: it would take another’s', async (_, tag, sign, named) => {
    const email = uniqueEmail(tag);
    const squatted = `${sign}${email.slice(1)}`;
    const refused = await t
      .http()
      .post('/v1/auth/signup')
      .send({ email: squatted, password: 'a long enough password' });
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.error.details).toEqual([
      expect.objectContaining({ field: 'email', problem: expect.stringContaining(named) }),
    ]);
    // The owner of the address signs up.
    expect((await signUp(t, { email })).email).toBe(email);
  });

  it('refuses a local part that reads as words or hides characters: quoted, spaced, invisible', async () => {
    const email = uniqueEmail('plain');
    const [local, domain] = email.split('@');
    for (const [address, problem] of [
      // A second account for the same mailbox, and a sentence in a quoted local part.
      [`"${local}"@${domain}`, 'quoted'],
      ['"Security: unlock at paypa1.example"@evil.test', 'quoted'],
      // The same sentence unquoted: U+A789 for the colon, U+2800 (which draws as a space) for
      // the spaces; and the colon alone.
      ['Security\uA789\u2800unlock\u2800at@paypa1.example', 'invisible'],
      ['Security\uA789unlock@paypa1.example', 'symbol outside ASCII'],
      // A zero-width space inside, a right-to-left override.
      [`${local.slice(0, 3)}\u200b${local.slice(3)}@${domain}`, 'invisible'],
      [`a\u202Eb-${local}@${domain}`, 'invisible'],
      // A Cyrillic а among Latin letters, in the local part or in the domain (review).
      [`\u0430dmin-${local}@${domain}`, 'mixing scripts'],
      [`${local}@ex\u0430mple.test`, 'mixing scripts'],
    ]) {
      const refused = await t
        .http()
        .post('/v1/auth/signup')
        .send({ email: address, password: 'a long enough password' });
      expectError(refused, 400, 'validation_failed');
      expect(refused.body.error.details).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ field: 'email', problem: expect.stringContaining(problem) }),
        ]),
      );
    }
    // The mailbox's own spelling signs up; an apostrophe, a plus, another script or Latin with
    // the scripts Japanese is written in stays an address.
    expect((await signUp(t, { email })).email).toBe(email);
    for (const other of [
      `o'brien+${local}@${domain}`,
      `éva-${local}@${domain}`,
      `пример-${local.replace(/[^0-9-]/g, '')}@почта.рф`,
      `山田taro-${local}@${domain}`,
    ]) {
      expect((await signUp(t, { email: other })).email).toBe(other);
    }
  });

  it('refuses short passwords and unknown fields', async () => {
    expectError(
      await t.http().post('/v1/auth/signup').send({ email: uniqueEmail(), password: 'short' }),
      400,
      'validation_failed',
    );
    expectError(
      await t
        .http()
        .post('/v1/auth/signup')
        .send({ email: uniqueEmail(), password: 'long enough password', role: 'admin' }),
      400,
      'validation_failed',
    );
  });

  it('answers 401 without a credential or with a bad one', async () => {
    expectError(await t.http().get('/v1/api-keys'), 401, 'unauthenticated');
    expectError(
      await t.http().get('/v1/api-keys').set('Authorization', 'Bearer nonsense'),
      401,
      'unauthenticated',
    );
    expectError(
      await t.http().get('/v1/api-keys').set('Authorization', 'Basic abc'),
      401,
      'unauthenticated',
    );
    expectError(
      await t.http().get('/v1/api-keys').set('Authorization', 'Bearer pk_notakey'),
      401,
      'unauthenticated',
    );
  });

  it('creates a key shown once, lists it without the key, and refuses it once revoked', async () => {
    const owner = await signUp(t);
    const auth = `Bearer ${owner.accessToken}`;
    const created = await t
      .http()
      .post('/v1/api-keys')
      .set('Authorization', auth)
      .send({ name: 'ci', scopes: ['admin'] });
    expect(created.status).toBe(201);
    expect(created.body.key).toMatch(/^pk_[0-9A-Za-z]{49}$/);
    expect(created.body.prefix).toBe(created.body.key.slice(0, 11));
    const list = await t
      .http()
      .get('/v1/api-keys')
      .set('Authorization', `Bearer ${created.body.key}`);
    expect(list.status).toBe(200);
    expect(list.body.data).toHaveLength(1);
    expect(JSON.stringify(list.body)).not.toContain(created.body.key);
    expect(list.body.data[0].last_four).toBe(created.body.key.slice(-4));

    const revoked = await t
      .http()
      .delete(`/v1/api-keys/${created.body.id}`)
      .set('Authorization', auth);
    expect(revoked.status).toBe(204);
    expectError(
      await t.http().get('/v1/api-keys').set('Authorization', `Bearer ${created.body.key}`),
      401,
      'unauthenticated',
    );
  });

  it('refuses a key without the scope (403) and a key on a user-only route (403)', async () => {
    const tenant = await tenantWithKey(t, ['read']);
    expectError(
      await t.http().get('/v1/api-keys').set('Authorization', tenant.auth),
      403,
      'insufficient_scope',
    );
    expectError(
      await t.http().get('/v1/organizations').set('Authorization', tenant.auth),
      403,
      'user_token_required',
    );
  });

  it('does not let a key grant scopes its creator lacks', async () => {
    const owner = await signUp(t);
    const readWrite = await createApiKey(t, owner.accessToken, ['admin']);
    const limited = await t
      .http()
      .post('/v1/api-keys')
      .set('Authorization', `Bearer ${readWrite}`)
      .send({ name: 'x', scopes: ['read'] });
    expect(limited.status).toBe(201);
    const escalate = await t
      .http()
      .post('/v1/api-keys')
      .set('Authorization', `Bearer ${limited.body.key}`)
      .send({ name: 'y', scopes: ['admin'] });
    expectError(escalate, 403, 'insufficient_scope');
  });

  it('answers 403 not_a_member for a foreign or malformed X-Organization-Id', async () => {
    const a = await signUp(t);
    const b = await signUp(t);
    for (const header of [b.organizationId, 'not-a-uuid']) {
      const response = await t
        .http()
        .get('/v1/organizations')
        .set('Authorization', `Bearer ${a.accessToken}`)
        .set('X-Organization-Id', header);
      expectError(response, 403, 'not_a_member');
    }
  });

  it("refuses an API key with an X-Organization-Id naming another organization than the key's", async () => {
    const a = await tenantWithKey(t, ['read']);
    const b = await signUp(t);
    const withHeader = (header: string) =>
      t
        .http()
        .get('/v1/personalities')
        .set('Authorization', a.auth)
        .set('X-Organization-Id', header);
    for (const header of [b.organizationId, 'not-a-uuid', '']) {
      expectError(await withHeader(header), 403, 'not_a_member');
    }
    // A route for users alone refuses the key for what it is.
    expectError(
      await t
        .http()
        .get('/v1/me')
        .set('Authorization', a.auth)
        .set('X-Organization-Id', b.organizationId),
      403,
      'user_token_required',
    );
    // Its own, in any case, and none at all, act as before.
    expect((await withHeader(a.organizationId.toUpperCase())).status).toBe(200);
    expect((await t.http().get('/v1/personalities').set('Authorization', a.auth)).status).toBe(200);
  });

  it('signs out of one access token (204): it is refused from then on, the user’s others and keys go on', async () => {
    const user = await signUp(t);
    const key = await createApiKey(t, user.accessToken, ['read']);
    const second = await t
      .http()
      .post('/v1/auth/login')
      .send({ email: user.email, password: user.password });
    expect(second.status).toBe(200);
    const other = second.body.access_token as string;
    expect(other).not.toBe(user.accessToken);
    const me = (token: string) => t.http().get('/v1/me').set('Authorization', `Bearer ${token}`);
    const logout = (auth: string) => t.http().post('/v1/auth/logout').set('Authorization', auth);

    const ended = await logout(`Bearer ${user.accessToken}`);
    expect(ended.status).toBe(204);
    expect(ended.text).toBe('');
    expectError(await me(user.accessToken), 401, 'unauthenticated');
    expectError(await logout(`Bearer ${user.accessToken}`), 401, 'unauthenticated');
    expect((await me(other)).status).toBe(200);
    expect(
      (await t.http().get('/v1/personalities').set('Authorization', `Bearer ${key}`)).status,
    ).toBe(200);
    // A key sent again with another token ends that one too: the route runs, no stored 204 is
    // replayed (review: the second token lived on).
    const third = (
      await t.http().post('/v1/auth/login').send({ email: user.email, password: user.password })
    ).body.access_token as string;
    for (const token of [other, third]) {
      const keyed = await logout(`Bearer ${token}`).set('Idempotency-Key', 'sign-me-out');
      expect(keyed.status).toBe(204);
      expect(keyed.headers['idempotent-replayed']).toBeUndefined();
      expectError(await me(token), 401, 'unauthenticated');
    }
    // An API key is not a session: it is revoked, not signed out of.
    expectError(await logout(`Bearer ${key}`), 403, 'user_token_required');
    expectError(await t.http().post('/v1/auth/logout'), 401, 'unauthenticated');
  });
});
