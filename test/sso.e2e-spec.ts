import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { expectError, expectRequestId } from './support/assertions';
import { signUp, tenantWithKey } from './support/identity';
import { TestOidcProvider } from './support/jwks-server';
import { createTestApp, TestApp } from './support/test-app';
import { UNTHROTTLED } from './support/unthrottled';
import { sleep } from './support/wait';

describe('SSO identities (OIDC id_tokens verified against a JWKS)', () => {
  let t: TestApp;
  let idp: TestOidcProvider;
  let other: TestOidcProvider;
  const idTokens: string[] = [];
  const accessTokens = new Set<string>();

  beforeAll(async () => {
    idp = await new TestOidcProvider('acme').start();
    other = await new TestOidcProvider('other').start();
    t = await createTestApp({
      env: { ...UNTHROTTLED, SSO_PROVIDERS: JSON.stringify([idp.config, other.config]) },
    });
  });
  afterAll(async () => {
    await t.close();
    await idp.stop();
    await other.stop();
  });

  const token = async (
    options: Parameters<TestOidcProvider['idToken']>[0] = {},
    provider = idp,
  ) => {
    const value = await provider.idToken(options);
    idTokens.push(value);
    return value;
  };
  const link = (accessToken: string, idToken: string, provider = 'acme') => {
    accessTokens.add(accessToken);
    return t
      .http()
      .post('/v1/me/sso/link')
      .set('Authorization', `Bearer ${accessToken}`)
      .send({ provider, id_token: idToken });
  };
  const ssoLogin = async (idToken: string, provider = 'acme') => {
    const response = await t
      .http()
      .post('/v1/auth/sso/login')
      .send({ provider, id_token: idToken });
    if (typeof response.body?.access_token === 'string')
      accessTokens.add(response.body.access_token);
    return response;
  };

  it('links a new identity (201), answers 200 for the same user again, 409 for another user', async () => {
    const alice = await signUp(t);
    const bob = await signUp(t);
    const sub = `sub-${randomUUID()}`;
    const created = await link(alice.accessToken, await token({ sub, email: 'alice@idp.example' }));
    expect(created.status).toBe(201);
    expectRequestId(created);
    expect(created.body).toEqual({
      id: expect.any(String),
      provider: 'acme',
      subject: sub,
      email: 'alice@idp.example',
      linked_at: expect.any(String),
    });
    const again = await link(alice.accessToken, await token({ sub }));
    expect(again.status).toBe(200);
    expect(again.body).toEqual(created.body);

    expectError(await link(bob.accessToken, await token({ sub })), 409, 'sso_identity_taken');

    const list = await t
      .http()
      .get('/v1/me/sso')
      .set('Authorization', `Bearer ${alice.accessToken}`);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: [created.body], has_more: false });
    const bobs = await t.http().get('/v1/me/sso').set('Authorization', `Bearer ${bob.accessToken}`);
    expect(bobs.body).toEqual({ data: [], has_more: false });
  });

  it('accepts ES256 as well as RS256, and the same subject at another provider is another identity', async () => {
    const u = await signUp(t);
    const sub = `sub-${randomUUID()}`;
    expect((await link(u.accessToken, await token({ sub, kid: idp.keys[1].kid }))).status).toBe(
      201,
    );
    const elsewhere = await link(u.accessToken, await token({ sub }, other), 'other');
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.body.provider).toBe('other');
  });

  it('accepts a token of several audiences issued to this client (azp), and one of this audience alone whatever its azp', async () => {
    const u = await signUp(t);
    const sub = `sub-${randomUUID()}`;
    const several = await token({
      sub,
      audience: ['someone-else', idp.audience],
      azp: idp.audience,
    });
    expect((await link(u.accessToken, several)).status).toBe(201);
    expect((await ssoLogin(await token({ sub, azp: idp.audience }))).status).toBe(200);
    // Google's cross-client sign-in: the app's client as azp, the backend's as the audience.
    expect((await ssoLogin(await token({ sub, azp: 'the-android-app' }))).status).toBe(200);
  });

  it('gives exactly one 201 and one 409 when two users link one identity at the same moment', async () => {
    const alice = await signUp(t);
    const bob = await signUp(t);
    for (let round = 0; round < 5; round++) {
      const sub = `race-${randomUUID()}`;
      const [a, b] = await Promise.all([
        link(alice.accessToken, await token({ sub })),
        link(bob.accessToken, await token({ sub })),
      ]);
      expect([a.status, b.status].sort()).toEqual([201, 409]);
      expectError(a.status === 409 ? a : b, 409, 'sso_identity_taken');
    }
  });

  it('refuses id_tokens that fail verification with 401 invalid_id_token', async () => {
    const u = await signUp(t);
    const forger = await TestOidcProvider.key('RS256', idp.keys[0].kid);
    const now = Math.floor(Date.now() / 1000);
    const cases: Record<string, string> = {
      'forged signature': await token({ forgedWith: forger }),
      'wrong audience': await token({ audience: 'someone-else' }),
      // Issued to another client (OpenID Connect Core 3.1.3.7; review).
      'several audiences, no azp': await token({ audience: ['someone-else', idp.audience] }),
      'several audiences, azp another': await token({
        audience: ['someone-else', idp.audience],
        azp: 'someone-else',
      }),
      'wrong issuer': await token({ issuer: 'https://evil.example' }),
      expired: await token({ expiresIn: -120 }),
      'not yet valid': await token({ notBefore: 600 }),
      'unknown kid': await token({ kid: 'no-such-kid' }),
      'another provider’s token': await token({}, other),
      'HS256 with a public key as secret': await new SignJWT({})
        .setProtectedHeader({ alg: 'HS256', kid: idp.keys[0].kid })
        .setSubject('x')
        .setIssuer(idp.issuer)
        .setAudience(idp.audience)
        .setExpirationTime(now + 300)
        .sign(new TextEncoder().encode(JSON.stringify(idp.keys[0].publicJwk))),
      'alg none': `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(
        JSON.stringify({ sub: 'x', iss: idp.issuer, aud: idp.audience, exp: now + 300 }),
      ).toString('base64url')}.`,
      garbage: 'not-a-jwt',
      'U+0000 in sub': await token({ sub: 'subject\u0000one' }),
      'an unpaired surrogate in sub': await token({ sub: 'subject\ud800' }),
      'U+0000 in email': await token({ email: 'someone\u0000@example.com' }),
    };
    for (const [name, idToken] of Object.entries(cases)) {
      const response = await link(u.accessToken, idToken);
      expect({ name, status: response.status }).toEqual({ name, status: 401 });
      expectError(response, 401, 'invalid_id_token');
      expectError(await ssoLogin(idToken), 401, 'invalid_id_token');
    }
  });

  it('answers 400 unknown_provider for a provider that is not configured', async () => {
    const u = await signUp(t);
    expectError(await link(u.accessToken, await token(), 'nope'), 400, 'unknown_provider');
    expectError(await ssoLogin(await token(), 'nope'), 400, 'unknown_provider');
    expectError(
      await t
        .http()
        .post('/v1/me/sso/link')
        .set('Authorization', `Bearer ${u.accessToken}`)
        .send({ provider: 'acme' }),
      400,
      'validation_failed',
    );
  });

  it('refuses API keys (403 user_token_required) and missing credentials (401) on /v1/me/sso', async () => {
    const tenant = await tenantWithKey(t, ['admin']);
    expectError(await link(tenant.key, await token()), 403, 'user_token_required');
    expectError(
      await t.http().get('/v1/me/sso').set('Authorization', tenant.auth),
      403,
      'user_token_required',
    );
    expectError(await t.http().get('/v1/me/sso'), 401, 'unauthenticated');
  });

  it('logs in the linked user, also while password login is locked; unlinked identities get 401', async () => {
    const u = await signUp(t);
    const sub = `sub-${randomUUID()}`;
    expectError(await ssoLogin(await token({ sub })), 401, 'unauthenticated');
    expect((await link(u.accessToken, await token({ sub }))).status).toBe(201);

    for (let i = 0; i < 16; i++) {
      await t.http().post('/v1/auth/login').send({ email: u.email, password: 'wrong password!' });
    }
    expectError(
      await t.http().post('/v1/auth/login').send({ email: u.email, password: u.password }),
      423,
      'login_locked',
    );
    const loggedIn = await ssoLogin(await token({ sub }));
    expect(loggedIn.status).toBe(200);
    expect(loggedIn.body).toEqual({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: expect.any(Number),
    });
    const orgs = await t
      .http()
      .get('/v1/organizations')
      .set('Authorization', `Bearer ${loggedIn.body.access_token}`);
    expect(orgs.status).toBe(200);
    expect(orgs.body.data[0].id).toBe(u.organizationId);
  });

  it('unlinks (204), 404 for another user’s identity, and the unlinked identity no longer logs in', async () => {
    const alice = await signUp(t);
    const bob = await signUp(t);
    const sub = `sub-${randomUUID()}`;
    const linked = await link(alice.accessToken, await token({ sub }));
    expect(linked.status).toBe(201);
    const remove = (accessToken: string, id: string) =>
      t.http().delete(`/v1/me/sso/${id}`).set('Authorization', `Bearer ${accessToken}`);
    expectError(await remove(bob.accessToken, linked.body.id), 404, 'not_found');
    expectError(await remove(alice.accessToken, 'not-a-uuid'), 404, 'not_found');
    // A session someone got through the identity before it was unlinked.
    const throughIt = await ssoLogin(await token({ sub }));
    expect(throughIt.status).toBe(200);
    const me = (accessToken: string) =>
      t.http().get('/v1/me').set('Authorization', `Bearer ${accessToken}`);
    expect((await me(throughIt.body.access_token)).status).toBe(200);
    const removed = await remove(alice.accessToken, linked.body.id);
    expect(removed.status).toBe(204);
    // The token the identity gave ends with it; hers, from her password, goes on (contract §7).
    expectError(await me(throughIt.body.access_token), 401, 'unauthenticated');
    const listed = await t
      .http()
      .get('/v1/me/sso')
      .set('Authorization', `Bearer ${alice.accessToken}`);
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({ data: [], has_more: false });
    expectError(await remove(alice.accessToken, linked.body.id), 404, 'not_found');
    expectError(await ssoLogin(await token({ sub })), 401, 'unauthenticated');
    // Free again: bob may link it now, and log in through it; her old session stays ended.
    expect((await link(bob.accessToken, await token({ sub }))).status).toBe(201);
    const bobs = await ssoLogin(await token({ sub }));
    expect(bobs.status).toBe(200);
    expect((await me(bobs.body.access_token)).body.id).toBe(bob.userId);
    expectError(await me(throughIt.body.access_token), 401, 'unauthenticated');
  });

  it('fetches the JWKS again for an unknown kid once the provider rotates its keys', async () => {
    const u = await signUp(t);
    expect((await link(u.accessToken, await token({ sub: `sub-${randomUUID()}` }))).status).toBe(
      201,
    );
    const fetchesBefore = idp.jwksRequests;
    const rotated = await TestOidcProvider.key('RS256', `acme-rsa-${randomUUID()}`);
    idp.keys.push(rotated);
    // jose refetches on an unknown kid, but at most once per cooldown (5 s): jose's own timer.
    await sleep(5_200);
    const response = await link(
      u.accessToken,
      await token({ sub: `sub-${randomUUID()}`, kid: rotated.kid }),
    );
    expect(response.status).toBe(201);
    expect(idp.jwksRequests).toBe(fetchesBefore + 1);
  });

  it('writes no id_token or access token to any log line', () => {
    const text = t.logs.text();
    const secrets = [...idTokens, ...accessTokens];
    // Both kinds were collected, so the check below has something to find.
    expect(idTokens.length).toBeGreaterThan(10);
    expect(accessTokens.size).toBeGreaterThan(5);
    for (const secret of secrets) expect(text).not.toContain(secret);
  });
});
