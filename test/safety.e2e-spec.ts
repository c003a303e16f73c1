import { Client } from 'pg';
import { expectError } from './support/assertions';
import { createApiKey, signUp, type SignedUp } from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';

/** Safety in companion conversations (contract §22): the organization's settings. */
describe('Safety settings: GET/PATCH /v1/organizations/{id}/safety', () => {
  let t: TestApp;
  let db: Client;
  let owner: SignedUp;

  beforeAll(async () => {
    t = await createTestApp();
    db = new Client({ connectionString: process.env.DATABASE_URL });
    await db.connect();
    owner = await signUp(t);
  });
  afterAll(async () => {
    await db.end();
    await t.close();
  });

  const path = (organizationId: string) => `/v1/organizations/${organizationId}/safety`;
  const bearer = (token: string) => `Bearer ${token}`;

  /** A user who is `role` of the owner's organization (their own organization comes first). */
  async function memberOf(organizationId: string, role: 'member' | 'admin'): Promise<SignedUp> {
    const user = await signUp(t);
    await db.query('INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, $3)', [
      organizationId,
      user.userId,
      role,
    ]);
    return user;
  }

  it('answers the defaults: crisis response on with a message naming 988, input flagged, output blocked', async () => {
    const response = await t
      .http()
      .get(path(owner.organizationId))
      .set('Authorization', bearer(owner.accessToken));
    expect(response.status).toBe(200);
    expect(response.body).toEqual({
      crisis_response: 'on',
      crisis_message: expect.stringContaining('988'),
      input_moderation: 'flag',
      output_moderation: 'block',
    });
    expect(response.body.crisis_message.length).toBeLessThanOrEqual(1000);
  });

  it('owners, admins and admin keys patch; members and read keys read but get 403; others 404', async () => {
    const admin = await memberOf(owner.organizationId, 'admin');
    const member = await memberOf(owner.organizationId, 'member');
    const adminKey = await createApiKey(t, owner.accessToken, ['admin']);
    const readKey = await createApiKey(t, owner.accessToken, ['read']);
    const stranger = await signUp(t);

    const patch = (auth: string, body: Record<string, unknown>) =>
      t.http().patch(path(owner.organizationId)).set('Authorization', auth).send(body);

    const byOwner = await patch(bearer(owner.accessToken), {
      crisis_message: 'Call 988.\nYou matter.',
      input_moderation: 'block',
    });
    expect(byOwner.status).toBe(200);
    expect(byOwner.body).toEqual({
      crisis_response: 'on',
      crisis_message: 'Call 988.\nYou matter.',
      input_moderation: 'block',
      output_moderation: 'block',
    });
    // The admin's token acts for their own organization first: the path names this one.
    expect((await patch(bearer(admin.accessToken), { output_moderation: 'flag' })).status).toBe(
      200,
    );
    expect((await patch(`Bearer ${adminKey}`, { crisis_response: 'off' })).body).toMatchObject({
      crisis_response: 'off',
      output_moderation: 'flag',
    });

    expectError(
      await patch(bearer(member.accessToken), { crisis_response: 'on' }),
      403,
      'insufficient_scope',
    );
    expectError(
      await patch(`Bearer ${readKey}`, { crisis_response: 'on' }),
      403,
      'insufficient_scope',
    );
    for (const auth of [bearer(member.accessToken), `Bearer ${readKey}`]) {
      const read = await t.http().get(path(owner.organizationId)).set('Authorization', auth);
      expect(read.status).toBe(200);
      expect(read.body.crisis_response).toBe('off');
    }
    expectError(
      await t
        .http()
        .get(path(owner.organizationId))
        .set('Authorization', bearer(stranger.accessToken)),
      404,
      'not_found',
    );
    expectError(
      await patch(bearer(stranger.accessToken), { crisis_response: 'on' }),
      404,
      'not_found',
    );
    expectError(
      await t.http().get(path('not-a-uuid')).set('Authorization', bearer(owner.accessToken)),
      404,
      'not_found',
    );
    expectError(await t.http().get(path(owner.organizationId)), 401, 'unauthenticated');

    // null restores the default message.
    const restored = await patch(bearer(owner.accessToken), { crisis_message: null });
    expect(restored.body.crisis_message).toContain('988');
  });

  it('refuses bad values: 1,001 characters, control characters, unknown modes and fields', async () => {
    const patch = (body: Record<string, unknown>) =>
      t
        .http()
        .patch(path(owner.organizationId))
        .set('Authorization', bearer(owner.accessToken))
        .send(body);
    for (const body of [
      { crisis_message: 'x'.repeat(1001) },
      { crisis_message: '' },
      { crisis_message: '   ' },
      { crisis_message: 'call\u0007now' },
      { crisis_message: 'tab\there' },
      { crisis_message: 5 },
      { crisis_response: true },
      { crisis_response: null },
      { input_moderation: 'strict' },
      { output_moderation: null },
      { colour: 'red' },
    ]) {
      expectError(await patch(body), 400, 'validation_failed');
    }
    expect((await patch({ crisis_message: '💙'.repeat(1000) })).status).toBe(200);
  });
});
