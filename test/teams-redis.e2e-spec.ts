import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { ApiKeysService } from '../src/api-keys/api-keys.service';
import { OrganizationsService } from '../src/organizations/organizations.service';
import { expectError } from './support/assertions';
import { signUp } from './support/identity';
import type { TestApp } from './support/test-app';
import { startTwoInstances, type TwoInstances } from './support/two-instances';
import { eventually } from './support/wait';

/**
 * Two instances sharing one database and one Redis: a removal or demotion answered by one holds
 * from the very next request on both, although both had the membership cached.
 */
describe('Membership changes reach every instance before they are answered (Redis)', () => {
  let instances: TwoInstances;
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    instances = await startTwoInstances();
    ({ a, b } = instances);
    // Both membership channels subscribed: caching is on.
    const live = (t: TestApp) =>
      t.app
        .get<OrganizationsService, { membershipChanges: { isLive(): boolean } }>(
          OrganizationsService,
        )
        .membershipChanges.isLive();
    await eventually(
      () => (live(a) && live(b) ? true : undefined),
      'both membership channels to subscribe',
      5_000,
    );
    expect(live(a) && live(b)).toBe(true);
  });
  afterAll(async () => {
    await instances?.close();
  });

  it('refuses a removed member on both instances at the next request, 100 times out of 100', async () => {
    const owner = await signUp(a);
    const member = await signUp(a);
    const org = owner.organizationId;
    const db = a.app.get<DataSource>(getDataSourceToken());
    const asMember = { Authorization: `Bearer ${member.accessToken}`, 'X-Organization-Id': org };
    const read = (t: TestApp) => t.http().get('/v1/personalities').set(asMember);
    let refusedAtOnce = 0;
    for (let round = 0; round < 100; round++) {
      await db.query(
        `INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, 'member')`,
        [org, member.userId],
      );
      await a.app.get(OrganizationsService).forgetMemberships(member.userId);
      // Both instances serve (and cache) the membership.
      expect((await read(a)).status).toBe(200);
      expect((await read(b)).status).toBe(200);
      const removedBy = round % 2 === 0 ? a : b;
      const removed = await removedBy
        .http()
        .delete(`/v1/organizations/${org}/members/${member.userId}`)
        .set('Authorization', `Bearer ${owner.accessToken}`);
      expect(removed.status).toBe(204);
      const [onA, onB] = [await read(a), await read(b)];
      if (onA.status === 403 && onB.status === 403) refusedAtOnce++;
      expectError(onB, 403, 'not_a_member');
    }
    expect(refusedAtOnce).toBe(100);
  });

  it('refuses a demoted admin the admin scope on the other instance at the next request', async () => {
    const owner = await signUp(a);
    const admin = await signUp(a);
    const org = owner.organizationId;
    const db = a.app.get<DataSource>(getDataSourceToken());
    await db.query(
      `INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, 'admin')`,
      [org, admin.userId],
    );
    await a.app.get(OrganizationsService).forgetMemberships(admin.userId);
    const asAdmin = { Authorization: `Bearer ${admin.accessToken}`, 'X-Organization-Id': org };
    expect((await b.http().get('/v1/api-keys').set(asAdmin)).status).toBe(200);
    const demoted = await a
      .http()
      .patch(`/v1/organizations/${org}/members/${admin.userId}`)
      .set('Authorization', `Bearer ${owner.accessToken}`)
      .send({ role: 'member' });
    expect(demoted.status).toBe(200);
    expectError(await b.http().get('/v1/api-keys').set(asAdmin), 403, 'insufficient_scope');
  });

  it('refuses the keys a removed member made on the other instance at the next request, 20 times out of 20', async () => {
    const owner = await signUp(a);
    const org = owner.organizationId;
    const db = a.app.get<DataSource>(getDataSourceToken());
    for (let round = 0; round < 20; round++) {
      const admin = await signUp(a);
      await db.query(
        `INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, 'admin')`,
        [org, admin.userId],
      );
      await a.app.get(OrganizationsService).forgetMemberships(admin.userId);
      const made = await a
        .http()
        .post('/v1/api-keys')
        .set({ Authorization: `Bearer ${admin.accessToken}`, 'X-Organization-Id': org })
        .send({ name: `round ${round}`, scopes: ['admin'] });
      expect(made.status).toBe(201);
      const withKey = { Authorization: `Bearer ${made.body.key as string}` };
      // Both instances serve (and cache) the key.
      expect((await a.http().get('/v1/audit-events?limit=1').set(withKey)).status).toBe(200);
      expect((await b.http().get('/v1/audit-events?limit=1').set(withKey)).status).toBe(200);
      const removedBy = round % 2 === 0 ? a : b;
      const other = removedBy === a ? b : a;
      const removed = await removedBy
        .http()
        .delete(`/v1/organizations/${org}/members/${admin.userId}`)
        .set('Authorization', `Bearer ${owner.accessToken}`);
      expect(removed.status).toBe(204);
      expectError(
        await other.http().get('/v1/audit-events?limit=1').set(withKey),
        401,
        'unauthenticated',
      );
    }
  });

  it('an instance shutting down hears removals and revocations until its HTTP server has closed', async () => {
    // Found by review: the channels closed in onModuleDestroy, before the server stopped taking
    // requests, so a removed member or a revoked key could be served from the cache meanwhile.
    const subscribed = (t: TestApp) => [
      t.app
        .get<OrganizationsService, { membershipChanges: { isLive(): boolean } }>(
          OrganizationsService,
        )
        .membershipChanges.isLive(),
      t.app
        .get<ApiKeysService, { revocations: { isLive(): boolean } }>(ApiKeysService)
        .revocations.isLive(),
    ];
    await eventually(
      () => (subscribed(b).every(Boolean) ? true : undefined),
      'the revocation channel to subscribe',
    );
    const server = b.app.getHttpServer();
    const closeServer = server.close.bind(server);
    let atServerClose: boolean[] = [];
    server.close = (callback?: (error?: Error) => void) => {
      atServerClose = subscribed(b);
      return closeServer(callback);
    };
    await b.app.close();
    expect(atServerClose).toEqual([true, true]);
    // And closed after it.
    expect(subscribed(b)).toEqual([false, false]);
  });
});
