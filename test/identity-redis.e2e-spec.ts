import { createHash, randomBytes } from 'node:crypto';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { expectError } from './support/assertions';
import { clonePersonality, respond, uniqueUserId } from './support/data-plane';
import { tenantWithKey } from './support/identity';
import type { TestApp } from './support/test-app';
import { startTwoInstances, type TwoInstances } from './support/two-instances';
import { eventually } from './support/wait';

const CHANNELS = [
  'identity:api-key-revoked',
  'identity:user-tokens-ended',
  'identity:signed-out',
  'personalities:changed',
];

/**
 * Polls B until the change made on A shows: the message through Redis pub/sub arrives within
 * milliseconds. The deadline is a fifth of the caches' 5 s lifetime, so only the message, never
 * an entry running out, can pass it.
 */
function onceChanged<T>(read: () => Promise<T>, changed: (value: T) => boolean): Promise<T> {
  return eventually(
    async () => {
      const value = await read();
      return changed(value) ? value : undefined;
    },
    'the change to reach instance B',
    1_000,
  );
}

/** Two instances sharing one database and one Redis, as in production behind a balancer. */
describe('Revocations and changes reach every instance at once through Redis', () => {
  let instances: TwoInstances;
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    // (Passport keeps one 'jwt' strategy per process, so here both apps verify tokens with B's
    // strategy and caches: what B is tested on.)
    instances = await startTwoInstances({ channels: CHANNELS });
    ({ a, b } = instances);
  });
  afterAll(async () => {
    await instances?.close();
  });

  const list = (t: TestApp, credential: string) =>
    t.http().get('/v1/api-keys').set('Authorization', `Bearer ${credential}`);

  it('refuses on instance B a key revoked on instance A, although B had it cached', async () => {
    const tenant = await tenantWithKey(a, ['admin']);
    const onB = await list(b, tenant.key);
    expect(onB.status).toBe(200);
    const id = onB.body.data[0].id as string;
    const revoked = await a
      .http()
      .delete(`/v1/api-keys/${id}`)
      .set('Authorization', `Bearer ${tenant.accessToken}`);
    expect(revoked.status).toBe(204);
    const onBAfter = await onceChanged(
      () => list(b, tenant.key),
      (response) => response.status !== 200,
    );
    expectError(onBAfter, 401, 'unauthenticated');
  });

  it('refuses on instance B, from the next request, an access token ended by a password reset on instance A', async () => {
    const tenant = await tenantWithKey(a, ['admin']);
    const db = a.app.get<DataSource>(getDataSourceToken());
    let accessToken = tenant.accessToken;
    for (let round = 0; round < 5; round++) {
      // B holds the token's version.
      expect((await list(b, accessToken)).status).toBe(200);
      const token = randomBytes(32).toString('base64url');
      await db.query(
        `INSERT INTO password_reset_tokens (user_id, token_hash, expires_at)
         VALUES ($1, $2, now() + interval '10 minutes')`,
        [tenant.userId, createHash('sha256').update(token).digest()],
      );
      const password = `a new password on A, round ${round}`;
      const reset = await a
        .http()
        .post('/v1/auth/reset-password')
        .send({ token, new_password: password });
      expect(reset.status).toBe(200);
      // The reset's answer waited for B to forget the version: refused at once, not eventually.
      expectError(await list(b, accessToken), 401, 'unauthenticated');
      const login = await a.http().post('/v1/auth/login').send({ email: tenant.email, password });
      expect(login.status).toBe(200);
      accessToken = login.body.access_token as string;
    }
  });

  it('refuses on instance B, from the next request, an access token signed out of on instance A', async () => {
    const tenant = await tenantWithKey(a, ['admin']);
    // B holds the token as not signed out of.
    expect((await list(b, tenant.accessToken)).status).toBe(200);
    const signedOut = await a
      .http()
      .post('/v1/auth/logout')
      .set('Authorization', `Bearer ${tenant.accessToken}`);
    expect(signedOut.status).toBe(204);
    // The answer waited for B to forget it: refused at once, not eventually.
    expectError(await list(b, tenant.accessToken), 401, 'unauthenticated');
    expect((await list(b, tenant.key)).status).toBe(200);
  });

  it('replies on instance B with a personality as changed on instance A, then not at all once deleted', async () => {
    const tenant = await tenantWithKey(a, ['read_write']);
    const auth = `Bearer ${tenant.key}`;
    const personalityId = await clonePersonality(a, auth);
    const talk = () =>
      respond(b, auth, { personality_id: personalityId, user_id: uniqueUserId(), message: 'hi' });
    const before = await talk();
    expect(before.status).toBe(200);
    const greeting = 'Greetings from the patched personality.';
    const template = ['As patched: {emotion}.'];
    const patched = await a
      .http()
      .patch(`/v1/personalities/${personalityId}`)
      .set('Authorization', auth)
      .send({
        replies: {
          first_meeting: greeting,
          positive: template,
          negative: template,
          ambiguous: template,
          neutral: template,
          recall: ['As patched, recalling {memory}.'],
        },
      });
    expect(patched.status).toBe(200);
    const after = await onceChanged(talk, (response) =>
      JSON.stringify(response.body).includes(greeting),
    );
    expect(after.status).toBe(200);
    expect(before.body.reply.text).not.toContain(greeting);
    expect(after.body.reply.text).toContain(greeting);

    const deleted = await a
      .http()
      .delete(`/v1/personalities/${personalityId}`)
      .set('Authorization', auth);
    expect(deleted.status).toBe(204);
    expectError(await onceChanged(talk, (response) => response.status !== 200), 404, 'not_found');
  });
});
