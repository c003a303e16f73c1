import { randomBytes } from 'node:crypto';
import type { DataSource, QueryRunner } from 'typeorm';
import type { Response } from 'supertest';
import { getDataSourceToken } from '@nestjs/typeorm';
import { PasswordResetService } from '../src/auth/password-reset.service';
import { expectError, expectRequestId } from './support/assertions';
import { createApiKey, signUp, signUpVerified, uniqueEmail } from './support/identity';
import { TestOidcProvider } from './support/jwks-server';
import { sessionsWaitingForLocks } from './support/locks';
import { Database } from '../src/database/database';
import { type CapturedMail, resetTokenOf, TestSmtpServer } from './support/smtp-server';
import { PasswordResetParticipants } from '../src/common/password-reset/password-reset-participants';
import { createTestApp, TestApp } from './support/test-app';
import { UNTHROTTLED } from './support/unthrottled';
import { eventually } from './support/wait';

const PUBLIC_URL = 'https://app.personality.example';
/** The reset mails among a user's (sign-up mails a verification link, a lockout a notice). */
const isResetMail = (mail: CapturedMail) => mail.subject === 'Reset your Personality API password';

describe('Login, the 15/24h lockout and password reset', () => {
  let t: TestApp;
  let smtp: TestSmtpServer;
  let db: DataSource;
  let idp: TestOidcProvider;
  const secrets: string[] = [];

  beforeAll(async () => {
    smtp = await new TestSmtpServer().start();
    idp = await new TestOidcProvider('acme').start();
    t = await createTestApp({
      env: {
        ...UNTHROTTLED,
        SMTP_URL: smtp.url,
        APP_PUBLIC_URL: PUBLIC_URL,
        SSO_PROVIDERS: JSON.stringify([idp.config]),
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      },
    });
    db = t.app.get<DataSource>(getDataSourceToken());
  });
  afterAll(async () => {
    await t.close();
    await smtp.stop();
    await idp.stop();
  });

  const login = (email: string, password: string) =>
    t.http().post('/v1/auth/login').send({ email, password });
  /** forgot-password answers first and mails afterwards: this waits for the mails in progress. */
  const mailsSent = () => t.app.get(PasswordResetService).idle();

  async function user() {
    const signed = await signUp(t);
    secrets.push(signed.password, signed.accessToken);
    return signed;
  }

  async function requestResetToken(email: string): Promise<string> {
    const before = smtp.mailsTo(email, isResetMail).length;
    const response = await t.http().post('/v1/auth/forgot-password').send({ email });
    expect(response.status).toBe(202);
    await mailsSent();
    const mails = smtp.mailsTo(email, isResetMail);
    expect(mails.length).toBe(before + 1);
    const token = resetTokenOf(mails[mails.length - 1]);
    secrets.push(token);
    return token;
  }

  /**
   * The answers of `requests`, let in with the token version still committed, while a reset's
   * transaction holds the user's row with the version raised (and whatever `alsoHeld` did in it),
   * once all of them wait for its locks and it has committed.
   */
  async function racingAReset(
    userId: string,
    requests: () => Array<PromiseLike<Response>>,
    alsoHeld: (reset: QueryRunner) => Promise<unknown> = async () => undefined,
  ): Promise<Response[]> {
    const reset = db.createQueryRunner();
    await reset.connect();
    try {
      await reset.startTransaction();
      await reset.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [userId]);
      await reset.query('UPDATE users SET token_version = token_version + 1 WHERE id = $1', [
        userId,
      ]);
      await alsoHeld(reset);
      const answers = requests().map((request) => Promise.resolve(request));
      await sessionsWaitingForLocks(t.app.get(Database), answers.length);
      await reset.commitTransaction();
      return await Promise.all(answers);
    } finally {
      if (reset.isTransactionActive) await reset.rollbackTransaction();
      await reset.release();
    }
  }

  it('logs in with the right password and refuses a wrong one with 401 invalid_credentials', async () => {
    const u = await user();
    const ok = await login(u.email.toUpperCase(), u.password);
    expect(ok.status).toBe(200);
    expectRequestId(ok);
    expect(ok.body).toEqual({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: expect.any(Number),
    });
    secrets.push(ok.body.access_token);
    const orgs = await t
      .http()
      .get('/v1/organizations')
      .set('Authorization', `Bearer ${ok.body.access_token}`);
    expect(orgs.status).toBe(200);
    expectError(await login(u.email, `${u.password}x`), 401, 'invalid_credentials');
    expectError(await login(uniqueEmail(), u.password), 401, 'invalid_credentials');
    expectError(
      await t.http().post('/v1/auth/login').send({ email: u.email }),
      400,
      'validation_failed',
    );
  });

  it('locks at the 15th failure: 15 × 401, then 423 login_locked even with the right password; a reset lifts it', async () => {
    const u = await user();
    for (let i = 1; i <= 15; i++) {
      expectError(await login(u.email, `wrong password ${i}`), 401, 'invalid_credentials');
    }
    expectError(await login(u.email, u.password), 423, 'login_locked');
    expectError(await login(u.email.toUpperCase(), 'wrong again here'), 423, 'login_locked');

    const token = await requestResetToken(u.email);
    const newPassword = `brand new password ${randomBytes(4).toString('hex')}`;
    secrets.push(newPassword);
    const reset = await t
      .http()
      .post('/v1/auth/reset-password')
      .send({ token, new_password: newPassword });
    expect(reset.status).toBe(200);
    expect(reset.body).toEqual({ status: 'password_reset' });
    expect((await login(u.email, newPassword)).status).toBe(200);
    expectError(await login(u.email, u.password), 401, 'invalid_credentials');
  });

  it('answers a known and an unknown address with identical status sequences', async () => {
    const known = await user();
    const unknown = uniqueEmail('nobody');
    const sequence = async (email: string) => {
      const statuses: Array<[number, string | undefined]> = [];
      for (let i = 0; i < 16; i++) {
        const response = await login(email, 'not the password!');
        statuses.push([response.status, response.body?.error?.code]);
      }
      // The account's real password changes nothing once locked.
      const right = await login(email, known.password);
      statuses.push([right.status, right.body?.error?.code]);
      const forgot = await t.http().post('/v1/auth/forgot-password').send({ email });
      statuses.push([forgot.status, JSON.stringify(forgot.body)]);
      return statuses;
    };
    const forKnown = await sequence(known.email);
    const forUnknown = await sequence(unknown);
    expect(forUnknown).toEqual(forKnown);
    expect(forKnown.slice(0, 15).every(([status]) => status === 401)).toBe(true);
    expect(forKnown[15][0]).toBe(423);
    expect(forKnown[16][0]).toBe(423);
    expect(forKnown[17]).toEqual([202, JSON.stringify({ status: 'reset_requested' })]);
  });

  it('is race-safe: 30 concurrent wrong logins give exactly 15 × 401 and 15 × 423', async () => {
    const u = await user();
    const responses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => login(u.email, `concurrent wrong ${i}`)),
    );
    const statuses = responses.map((response) => response.status).sort();
    expect(statuses.filter((status) => status === 401)).toHaveLength(15);
    expect(statuses.filter((status) => status === 423)).toHaveLength(15);
    const [row] = await db.query(
      'SELECT cardinality(failures) AS failures, locked_at FROM login_attempts WHERE email = lower($1)',
      [u.email],
    );
    expect(row.failures).toBeGreaterThanOrEqual(15);
    expect(row.locked_at).not.toBeNull();
    expectError(await login(u.email, u.password), 423, 'login_locked');
  });

  it('lifts the lock 24 hours after it was set', async () => {
    const u = await user();
    for (let i = 0; i < 15; i++) await login(u.email, 'wrong wrong wrong');
    expectError(await login(u.email, u.password), 423, 'login_locked');
    // 23 hours later: still locked.
    await db.query(
      `UPDATE login_attempts SET locked_at = locked_at - interval '23 hours',
              failures = ARRAY(SELECT f - interval '23 hours' FROM unnest(failures) f)
        WHERE email = lower($1)`,
      [u.email],
    );
    expectError(await login(u.email, u.password), 423, 'login_locked');
    // Past 24 hours: open again, and the old failures no longer count.
    await db.query(
      `UPDATE login_attempts SET locked_at = locked_at - interval '61 minutes',
              failures = ARRAY(SELECT f - interval '61 minutes' FROM unnest(failures) f)
        WHERE email = lower($1)`,
      [u.email],
    );
    expectError(await login(u.email, 'still the wrong one'), 401, 'invalid_credentials');
    expect((await login(u.email, u.password)).status).toBe(200);
  });

  it('counts failures in a rolling 24 hours and clears the count on success', async () => {
    const u = await user();
    for (let i = 0; i < 14; i++) await login(u.email, 'wrong wrong wrong');
    expect((await login(u.email, u.password)).status).toBe(200);
    const rows = await db.query('SELECT 1 FROM login_attempts WHERE email = lower($1)', [u.email]);
    expect(rows).toHaveLength(0);
    for (let i = 0; i < 14; i++) {
      expectError(await login(u.email, 'wrong wrong wrong'), 401, 'invalid_credentials');
    }
    // Failures older than 24 hours fall out of the window: the next failure is not the 15th.
    await db.query(
      `UPDATE login_attempts SET failures = ARRAY(SELECT f - interval '25 hours' FROM unnest(failures) f)
        WHERE email = lower($1)`,
      [u.email],
    );
    expectError(await login(u.email, 'wrong wrong wrong'), 401, 'invalid_credentials');
    expect((await login(u.email, u.password)).status).toBe(200);
  });

  it('mails a link built from APP_PUBLIC_URL, never from the Host header; unknown addresses get no mail', async () => {
    const u = await user();
    const response = await t
      .http()
      .post('/v1/auth/forgot-password')
      .set('Host', 'evil.example')
      .set('X-Forwarded-Host', 'evil.example')
      .send({ email: u.email });
    expect(response.status).toBe(202);
    expect(response.body).toEqual({ status: 'reset_requested' });
    const mail = await smtp.waitFor(u.email, 5_000, isResetMail);
    expect(mail.decoded).toContain(`${PUBLIC_URL}/console/reset-password?token=`);
    expect(mail.decoded).not.toContain('evil.example');
    const token = resetTokenOf(mail);
    secrets.push(token);
    expect(Buffer.from(token, 'base64url')).toHaveLength(32);
    // Only a hash is stored.
    const stored = await db.query(
      `SELECT encode(token_hash, 'hex') AS hash FROM password_reset_tokens t
         JOIN users u ON u.id = t.user_id WHERE lower(u.email) = lower($1)`,
      [u.email],
    );
    expect(stored).toHaveLength(1);
    expect(JSON.stringify(stored)).not.toContain(token);

    const nobody = uniqueEmail('nobody');
    const unknown = await t.http().post('/v1/auth/forgot-password').send({ email: nobody });
    expect(unknown.status).toBe(202);
    expect(unknown.body).toEqual(response.body);
    await mailsSent();
    expect(smtp.mailsTo(nobody)).toHaveLength(0);
  });

  it('refuses reused, expired and garbage tokens with 400 invalid_reset_token', async () => {
    const u = await user();
    const token = await requestResetToken(u.email);
    const reset = (value: string, password = 'a fresh password 123') =>
      t.http().post('/v1/auth/reset-password').send({ token: value, new_password: password });
    expect((await reset(token)).status).toBe(200);
    expectError(await reset(token), 400, 'invalid_reset_token');
    expectError(await reset('garbage'), 400, 'invalid_reset_token');
    expectError(await reset(randomBytes(32).toString('base64url')), 400, 'invalid_reset_token');
    expectError(await reset(`${token.slice(0, -1)}A`), 400, 'invalid_reset_token');
    expectError(
      await t.http().post('/v1/auth/reset-password').send({ token, new_password: 'short' }),
      400,
      'validation_failed',
    );

    const expiring = await requestResetToken(u.email);
    await db.query(
      `UPDATE password_reset_tokens SET expires_at = now() - interval '1 second'
        WHERE user_id = $1 AND used_at IS NULL`,
      [u.userId],
    );
    expectError(await reset(expiring), 400, 'invalid_reset_token');
  });

  it('lets exactly one of 10 concurrent uses of one token through', async () => {
    const u = await user();
    const token = await requestResetToken(u.email);
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        t
          .http()
          .post('/v1/auth/reset-password')
          .send({ token, new_password: `concurrent password ${i}` }),
      ),
    );
    const ok = responses.filter((response) => response.status === 200);
    expect(ok).toHaveLength(1);
    for (const response of responses.filter((r) => r.status !== 200)) {
      expectError(response, 400, 'invalid_reset_token');
    }
    const winner = responses.indexOf(ok[0]);
    expect((await login(u.email, `concurrent password ${winner}`)).status).toBe(200);
  });

  it('ends access tokens issued before a reset, and spends the other outstanding links', async () => {
    const u = await user();
    const before = (await login(u.email, u.password)).body.access_token as string;
    secrets.push(before);
    const auth = (token: string) =>
      t.http().get('/v1/organizations').set('Authorization', `Bearer ${token}`);
    expect((await auth(before)).status).toBe(200);
    expect((await auth(u.accessToken)).status).toBe(200);

    const first = await requestResetToken(u.email);
    const second = await requestResetToken(u.email);
    const reset = await t
      .http()
      .post('/v1/auth/reset-password')
      .send({ token: second, new_password: 'the password after reset' });
    expect(reset.status).toBe(200);
    expectError(await auth(before), 401, 'unauthenticated');
    expectError(await auth(u.accessToken), 401, 'unauthenticated');
    expectError(
      await t
        .http()
        .post('/v1/auth/reset-password')
        .send({ token: first, new_password: 'another password here' }),
      400,
      'invalid_reset_token',
    );
    const after = await login(u.email, 'the password after reset');
    expect(after.status).toBe(200);
    expect((await auth(after.body.access_token)).status).toBe(200);
  });

  it('two links of one user used at once: one resets, the other is refused, never a deadlock', async () => {
    for (let round = 0; round < 8; round++) {
      const u = await user();
      const links = [await requestResetToken(u.email), await requestResetToken(u.email)];
      const passwords = links.map((_, i) => `password ${i} of round ${round}`);
      secrets.push(...passwords);
      const answers = await Promise.all(
        links.map((token, i) =>
          t.http().post('/v1/auth/reset-password').send({ token, new_password: passwords[i] }),
        ),
      );
      // Found by review: each spent its own link, then waited for the other's (40P01, a 500).
      expect(answers.map((answer) => answer.status).sort()).toEqual([200, 400]);
    }
  });

  it('takes an account back at a reset: its SSO identities go, and an unverified one’s API keys and lone organizations’ webhook endpoints', async () => {
    // The modules taking part, found by discovery (auth imports none).
    expect(t.app.get(PasswordResetParticipants).names).toEqual([
      'ApiKeysService.revokeAtReset',
      'SsoService.unlinkAtReset',
      'WebhookEndpointsService.disableAtReset',
    ]);
    const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
    const resetWith = async (email: string, password: string) => {
      const token = await requestResetToken(email);
      secrets.push(password);
      const response = await t
        .http()
        .post('/v1/auth/reset-password')
        .send({ token, new_password: password });
      expect(response.status).toBe(200);
    };
    // Someone registers an address that is not theirs, links their own identity and makes a key.
    const squatter = await user();
    const idToken = await idp.idToken({ sub: `squatter-${randomBytes(4).toString('hex')}` });
    const linked = await t
      .http()
      .post('/v1/me/sso/link')
      .set(bearer(squatter.accessToken))
      .send({ provider: 'acme', id_token: idToken });
    expect(linked.status).toBe(201);
    const key = await createApiKey(t, squatter.accessToken, ['admin']);
    secrets.push(key);
    const ssoLogin = () =>
      t.http().post('/v1/auth/sso/login').send({ provider: 'acme', id_token: idToken });
    expect((await ssoLogin()).status).toBe(200);
    // They point an endpoint of each of two organizations at themselves; the second has another
    // member, who may have made its endpoint.
    const second = await t
      .http()
      .post('/v1/organizations')
      .set(bearer(squatter.accessToken))
      .send({ name: 'Squatted' });
    expect(second.status).toBe(201);
    const colleague = await user();
    await db.query(
      `INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, 'admin')`,
      [second.body.id, colleague.userId],
    );
    const endpointOf = async (organizationId: string) =>
      (
        await db.query(
          `INSERT INTO webhook_endpoints (organization_id, url, events, secret)
           VALUES ($1, 'https://hooks.example.com/in', '{end_user.created}', 'whsec_c3F1YXR0ZWQ=')
           RETURNING id`,
          [organizationId],
        )
      )[0].id as string;
    const alone = await endpointOf(squatter.organizationId);
    const shared = await endpointOf(second.body.id as string);
    // Made through the API, an endpoint records who made it: the squatter, with their token or
    // through a key they made, or the colleague.
    const inSecond = (auth: string) => ({
      Authorization: auth,
      'X-Organization-Id': second.body.id as string,
    });
    const madeWith = async (auth: string, name: string) => {
      const made = await t
        .http()
        .post('/v1/webhook-endpoints')
        .set(inSecond(auth))
        .send({ url: `http://127.0.0.1:9/${name}`, events: ['end_user.created'] });
      expect(made.status).toBe(201);
      return made.body.id as string;
    };
    const secondKey = await t
      .http()
      .post('/v1/api-keys')
      .set(inSecond(`Bearer ${squatter.accessToken}`))
      .send({ name: 'second', scopes: ['admin'] });
    expect(secondKey.status).toBe(201);
    secrets.push(secondKey.body.key as string);
    const squatters = [
      await madeWith(`Bearer ${squatter.accessToken}`, 'token'),
      await madeWith(`Bearer ${secondKey.body.key as string}`, 'key'),
    ];
    const colleagues = await madeWith(`Bearer ${colleague.accessToken}`, 'colleague');
    // One of the colleague's the squatter points at themselves: theirs now.
    const repointed = await madeWith(`Bearer ${colleague.accessToken}`, 'repointed');
    const patched = await t
      .http()
      .patch(`/v1/webhook-endpoints/${repointed}`)
      .set(inSecond(`Bearer ${squatter.accessToken}`))
      .send({ url: 'http://127.0.0.1:9/squatter-again' });
    expect(patched.status).toBe(200);

    // The mailbox's owner resets the password: neither the identity nor the key lets them in.
    await resetWith(squatter.email, 'the owner of the mailbox');
    expectError(await ssoLogin(), 401, 'unauthenticated');
    expectError(await t.http().get('/v1/personalities').set(bearer(key)), 401, 'unauthenticated');
    const owner = await login(squatter.email, 'the owner of the mailbox');
    secrets.push(owner.body.access_token);
    const me = await t.http().get('/v1/me').set(bearer(owner.body.access_token));
    expect(me.body.email_verified).toBe(true);
    const identities = await t.http().get('/v1/me/sso').set(bearer(owner.body.access_token));
    expect(identities.body.data).toEqual([]);
    const revoked = await db.query(
      `SELECT details->>'reason' AS reason FROM audit_events
        WHERE organization_id = $1 AND action = 'api_key.revoked'`,
      [squatter.organizationId],
    );
    expect(revoked).toEqual([{ reason: 'password_reset' }]);
    // The endpoints of the organization they were alone in stop, and those they made or pointed
    // in the shared one; the colleague's go on, and one made before endpoints named their maker.
    const statusOf = async (id: string) =>
      (
        await db.query<Array<{ status: string }>>(
          `SELECT status FROM webhook_endpoints WHERE id = $1`,
          [id],
        )
      )[0].status;
    expect(
      await Promise.all(
        [alone, ...squatters, repointed, colleagues, shared].map((id) => statusOf(id)),
      ),
    ).toEqual(['disabled', 'disabled', 'disabled', 'disabled', 'enabled', 'enabled']);
    const disabledAudit = await db.query(
      `SELECT details FROM audit_events
        WHERE organization_id = $1 AND action = 'webhook_endpoint.updated' AND target_id = $2`,
      [squatter.organizationId, alone],
    );
    expect(disabledAudit).toEqual([{ details: { status: 'disabled', reason: 'password_reset' } }]);

    // An organization that removed the user and kept their keys (?keep_api_keys=true) keeps
    // them through the reset: theirs to decide, not the ex-member's.
    // So are the endpoints they made there, with their token or through a key (found by review:
    // the ex-member's reset disabled them and failed their pending deliveries).
    const leaver = await user();
    const keptKey = await createApiKey(t, leaver.accessToken, ['admin']);
    secrets.push(keptKey);
    const leaversEndpoints: string[] = [];
    for (const credential of [leaver.accessToken, keptKey]) {
      const made = await t
        .http()
        .post('/v1/webhook-endpoints')
        .set(bearer(credential))
        .send({ url: 'http://127.0.0.1:9/kept', events: ['end_user.created'] });
      expect(made.status).toBe(201);
      leaversEndpoints.push(made.body.id as string);
    }
    await db.query('DELETE FROM memberships WHERE user_id = $1', [leaver.userId]);
    await resetWith(leaver.email, 'the leaver resets');
    expect((await t.http().get('/v1/personalities').set(bearer(keptKey))).status).toBe(200);
    expect(await Promise.all(leaversEndpoints.map((id) => statusOf(id)))).toEqual([
      'enabled',
      'enabled',
    ]);

    // A verified account keeps its keys; its identities go all the same (relinked after).
    const verified = await signUpVerified(t, smtp);
    secrets.push(verified.password, verified.accessToken);
    const ownKey = await createApiKey(t, verified.accessToken, ['read']);
    secrets.push(ownKey);
    const ownToken = await idp.idToken({ sub: `verified-${randomBytes(4).toString('hex')}` });
    await t
      .http()
      .post('/v1/me/sso/link')
      .set(bearer(verified.accessToken))
      .send({ provider: 'acme', id_token: ownToken })
      .expect(201);
    await resetWith(verified.email, 'a verified owner resets');
    expect((await t.http().get('/v1/personalities').set(bearer(ownKey))).status).toBe(200);
    expectError(
      await t.http().post('/v1/auth/sso/login').send({ provider: 'acme', id_token: ownToken }),
      401,
      'unauthenticated',
    );
  });

  it('makes no link and no key for a request authenticated before a reset that commits while it waits', async () => {
    const squatter = await user();
    const bearer = { Authorization: `Bearer ${squatter.accessToken}` };
    const me = (await t.http().get('/v1/me').set(bearer)).body as { id: string };
    const idToken = await idp.idToken({ sub: `late-${randomBytes(4).toString('hex')}` });
    // What a reset's transaction holds once it has raised the version, before it commits.
    const reset = db.createQueryRunner();
    await reset.connect();
    try {
      await reset.startTransaction();
      await reset.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [me.id]);
      await reset.query(
        `UPDATE users SET token_version = token_version + 1,
                email_verified_at = coalesce(email_verified_at, now())
          WHERE id = $1`,
        [me.id],
      );
      // Both authenticated with the version still committed, then wait for the user's row.
      const linking = t
        .http()
        .post('/v1/me/sso/link')
        .set(bearer)
        .send({ provider: 'acme', id_token: idToken })
        .then((response) => response);
      const keying = t
        .http()
        .post('/v1/api-keys')
        .set(bearer)
        .send({ name: 'made late', scopes: ['admin'] })
        .then((response) => response);
      await sessionsWaitingForLocks(t.app.get(Database), 2);
      await reset.commitTransaction();
      // Before, both were made after the reset (201): a squatter's link and key outlived it.
      expectError(await linking, 401, 'unauthenticated');
      expectError(await keying, 401, 'unauthenticated');
      // Authenticated by the version this instance still holds for 5 s: the reset verified the
      // address, and an invitation read it so (201 before).
      expectError(
        await t
          .http()
          .post(`/v1/organizations/${squatter.organizationId}/invitations`)
          .set(bearer)
          .send({ email: uniqueEmail('second-account'), role: 'owner' }),
        401,
        'unauthenticated',
      );
    } finally {
      if (reset.isTransactionActive) await reset.rollbackTransaction();
      await reset.release();
    }
    const made = await db.query(
      `SELECT (SELECT count(*) FROM sso_identities WHERE user_id = $1)::int AS links,
              (SELECT count(*) FROM api_keys WHERE created_by_user_id = $1)::int AS keys`,
      [me.id],
    );
    expect(made).toEqual([{ links: 0, keys: 0 }]);
  });

  it('makes or points no webhook endpoint for a request authenticated before a reset that commits while it waits', async () => {
    const squatter = await user();
    const bearer = { Authorization: `Bearer ${squatter.accessToken}` };
    const me = (await t.http().get('/v1/me').set(bearer)).body as { id: string };
    const made = await t
      .http()
      .post('/v1/api-keys')
      .set(bearer)
      .send({ name: 'theirs', scopes: ['admin'] })
      .expect(201);
    secrets.push(made.body.key as string);
    const keyAuth = { Authorization: `Bearer ${made.body.key as string}` };
    const endpoint = await t
      .http()
      .post('/v1/webhook-endpoints')
      .set(bearer)
      .send({ url: 'http://127.0.0.1:9/before', events: ['end_user.created'] })
      .expect(201);
    // Both credentials in this instance's caches, as a request let in just before the reset.
    await t.http().get('/v1/webhook-endpoints').set(keyAuth).expect(200);
    // What a reset's transaction holds once it has raised the version and revoked the user's
    // keys (ApiKeysService.revokeAtReset), before its takeback reads the endpoints.
    const answers = await racingAReset(
      me.id,
      () => [
        t
          .http()
          .post('/v1/webhook-endpoints')
          .set(bearer)
          .send({ url: 'http://127.0.0.1:9/late-token', events: ['end_user.created'] }),
        t
          .http()
          .patch(`/v1/webhook-endpoints/${endpoint.body.id as string}`)
          .set(bearer)
          .send({ url: 'http://127.0.0.1:9/late-repointed' }),
        t
          .http()
          .post('/v1/webhook-endpoints')
          .set(keyAuth)
          .send({ url: 'http://127.0.0.1:9/late-key', events: ['end_user.created'] }),
      ],
      (reset) =>
        reset.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [made.body.id]),
    );
    // Before, all three wrote after the reset (201, 200, 201), and the takeback, which had read
    // the endpoints already, left them sending where the squatter pointed them.
    for (const answered of answers) expectError(answered, 401, 'unauthenticated');
    const urls = await db.query(
      'SELECT url FROM webhook_endpoints WHERE organization_id = $1 ORDER BY url',
      [squatter.organizationId],
    );
    expect(urls).toEqual([{ url: 'http://127.0.0.1:9/before' }]);
  });

  it('changes no organization setting for a request authenticated before a reset that commits while it waits', async () => {
    const owner = await user();
    const bearer = { Authorization: `Bearer ${owner.accessToken}` };
    const me = (await t.http().get('/v1/me').set(bearer)).body as { id: string };
    const organization = `/v1/organizations/${owner.organizationId}`;
    // Let in on the version still committed (and cached), then waiting for the user's row.
    const answers = await racingAReset(me.id, () => [
      t.http().patch(`${organization}/limits`).set(bearer).send({ monthly_token_budget: 5 }),
      t.http().patch(`${organization}/safety`).set(bearer).send({ crisis_response: 'off' }),
      t.http().patch(organization).set(bearer).send({ memory_retention_days: 3 }),
    ]);
    // Before, all three wrote after the reset (200), as the ended token's action.
    for (const answered of answers) expectError(answered, 401, 'unauthenticated');
    const [stored] = await db.query(
      `SELECT o.memory_retention_days AS retention,
              (SELECT count(*) FROM organization_limits l WHERE l.organization_id = o.id)::int
                AS limits,
              (SELECT count(*) FROM organization_safety_settings s WHERE s.organization_id = o.id)::int
                AS safety,
              (SELECT count(*) FROM audit_events a WHERE a.organization_id = o.id
                  AND a.action IN ('limits.updated', 'safety_settings.updated',
                                   'organization.updated'))::int AS audited
         FROM organizations o WHERE o.id = $1`,
      [owner.organizationId],
    );
    expect(stored).toEqual({ retention: null, limits: 0, safety: 0, audited: 0 });
  });

  it('sends at most five reset mails per user and hour', async () => {
    const u = await user();
    for (let i = 0; i < 7; i++) {
      const response = await t.http().post('/v1/auth/forgot-password').send({ email: u.email });
      expect(response.status).toBe(202);
      expect(response.body).toEqual({ status: 'reset_requested' });
      // One after another: the cap is soft for simultaneous requests.
      await mailsSent();
    }
    expect(smtp.mailsTo(u.email, isResetMail)).toHaveLength(5);
    secrets.push(...smtp.mailsTo(u.email, isResetMail).map(resetTokenOf));
  });

  it('writes no password, token or key to any log line', () => {
    const text = t.logs.text();
    expect(secrets.length).toBeGreaterThan(10);
    for (const secret of secrets) expect(text).not.toContain(secret);
    expect(text).not.toMatch(/token=[A-Za-z0-9_-]{20,}/);
  });
});

describe('Password reset without SMTP_URL', () => {
  it('renders the mail and logs that it was written, with the token redacted', async () => {
    const t = await createTestApp({
      env: { ...UNTHROTTLED, SMTP_URL: undefined, APP_PUBLIC_URL: PUBLIC_URL },
    });
    try {
      const u = await signUp(t);
      const response = await t.http().post('/v1/auth/forgot-password').send({ email: u.email });
      expect(response.status).toBe(202);
      await t.app.get(PasswordResetService).idle();
      const line = await eventually(
        () =>
          t.logs
            .entries()
            .find((entry) => String(entry.msg).includes('SMTP_URL is unset: password reset mail')),
        'the log line of the unsent mail',
      );
      expect(line).toMatchObject({
        userId: u.userId,
        mail: {
          to: expect.stringMatching(/^u\*\*\*@example\.test$/),
          link: `${PUBLIC_URL}/console/reset-password?token=[redacted]`,
        },
      });
      expect(t.logs.text()).not.toContain(u.email);
      expect(t.logs.text()).not.toMatch(/token=[A-Za-z0-9_-]{20,}/);
    } finally {
      await t.close();
    }
  });
});
