import { randomUUID } from 'node:crypto';
import type { TestingModule } from '@nestjs/testing';
import { ApiKeysModule } from '../../src/api-keys/api-keys.module';
import { ApiKeysRepository } from '../../src/api-keys/api-keys.repository';
import { ApiKeysService } from '../../src/api-keys/api-keys.service';
import type { Scope, UserCaller } from '../../src/common/auth/caller';
import { Clock, ManualClock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';
import { type OwnRedis, startOwnRedis } from '../support/redis-server';

/**
 * The api-keys module alone on a real PostgreSQL, without HTTP (a "medium" spec): ApiKeysService
 * called directly, its rules checked against the rows it writes, time moved by a ManualClock (the
 * module's Clock answers it) instead of sleeps. Users and organizations are written by Factory.
 */
describe('ApiKeysService (real database)', () => {
  const clock = new ManualClock();
  let moduleRef: TestingModule;
  let keys: ApiKeysService;
  let database: Database;
  let factory: Factory;

  beforeAll(async () => {
    moduleRef = await moduleAlone([ApiKeysModule], { REDIS_URL: undefined }, (builder) =>
      builder.overrideProvider(Clock).useValue(clock),
    );
    keys = moduleRef.get(ApiKeysService);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterAll(async () => {
    await moduleRef?.close();
  });

  /** The owner of a fresh organization, acting with `scopes`. */
  async function userWith(scopes: Scope[]): Promise<UserCaller> {
    const organizationId = await factory.organization();
    const userId = await factory.member(organizationId, 'owner');
    return {
      kind: 'user',
      userId,
      organizationId,
      scopes,
      requestId: randomUUID(),
      ip: '192.0.2.10',
    };
  }

  async function auditEvents(organizationId: string, action: string) {
    return database.rows<{ target_id: string; actor_id: string; details: Record<string, unknown> }>(
      sql`SELECT target_id, actor_id, details FROM audit_events
           WHERE organization_id = ${organizationId} AND action = ${action} ORDER BY created_at`,
    );
  }

  /** When the events were written: the service's Clock, not the database's, dates them. */
  async function auditTimes(organizationId: string, action: string): Promise<string[]> {
    const rows = await database.rows<{ created_at: Date }>(
      sql`SELECT created_at FROM audit_events
           WHERE organization_id = ${organizationId} AND action = ${action}`,
    );
    return rows.map((row) => row.created_at.toISOString());
  }

  it('creates a key with scopes the caller holds, and refuses scopes it does not', async () => {
    const caller = await userWith(['read_write']);
    await expectAppError(
      keys.create(caller, { name: 'too much', scopes: ['admin'] }),
      'insufficient_scope',
    );
    const created = await keys.create(caller, { name: 'reader', scopes: ['read'] });
    expect(created).toEqual(
      expect.objectContaining({ name: 'reader', scopes: ['read'], expires_at: null }),
    );
    expect(created.key.startsWith(created.prefix)).toBe(true);
    expect(created.key.endsWith(created.last_four)).toBe(true);

    await expect(keys.authenticate(created.key)).resolves.toEqual({
      kind: 'api_key',
      organizationId: caller.organizationId,
      scopes: ['read'],
      apiKeyId: created.id,
    });
    expect(await auditEvents(caller.organizationId, 'api_key.created')).toEqual([
      {
        target_id: created.id,
        actor_id: caller.userId,
        details: { name: 'reader', scopes: ['read'], expires_at: null },
      },
    ]);
    expect(await auditTimes(caller.organizationId, 'api_key.created')).toEqual([
      clock.now().toISOString(),
    ]);
    const page = await keys.list(caller.organizationId, 10);
    expect(page.data.map((key) => key.id)).toEqual([created.id]);
  });

  it('makes, rolls, renames and revokes no key for a user no longer an owner or admin, whatever their token says (403)', async () => {
    const owner = await userWith(['admin']);
    const { organizationId } = owner;
    const rolled = await keys.create(owner, { name: 'to roll', scopes: ['read'] });
    // Callers whose admin scope came from a role since lost: demoted to member, or removed.
    const demoted: UserCaller = {
      ...owner,
      userId: await factory.member(organizationId, 'member'),
    };
    const removed: UserCaller = { ...owner, userId: (await userWith(['admin'])).userId };
    for (const caller of [demoted, removed]) {
      await expectAppError(
        keys.create(caller, { name: 'after the role went', scopes: ['read'] }),
        'insufficient_scope',
      );
      await expectAppError(keys.roll(caller, rolled.id, 60), 'insufficient_scope');
      // Before, these wrote on the role read before the request, whatever it had become.
      await expectAppError(
        keys.update(caller, rolled.id, { rate_limit: { rps: 1_000, burst: 5_000 } }),
        'insufficient_scope',
      );
      await expectAppError(keys.revoke(caller, rolled.id), 'insufficient_scope');
    }
    // A key that is not the organization's is still 404 to an owner.
    await expectAppError(keys.revoke(owner, randomUUID()), 'not_found');
    const made = await database.rows<{ name: string; revoked_at: Date | null }>(
      sql`SELECT name, revoked_at FROM api_keys WHERE organization_id = ${organizationId}`,
    );
    expect(made).toEqual([{ name: 'to roll', revoked_at: null }]);
    expect(await auditEvents(organizationId, 'api_key.updated')).toEqual([]);
    await expect(keys.authenticate(rolled.key)).resolves.toMatchObject({ apiKeyId: rolled.id });
  });

  it('honours expires_at by the clock: refused in the past, accepted until then, refused after', async () => {
    const caller = await userWith(['admin']);
    await expectAppError(
      keys.create(caller, {
        name: 'past',
        scopes: ['read'],
        expires_at: new Date(clock.nowMs() - 1).toISOString(),
      }),
      'validation_failed',
    );
    const expiresAt = new Date(clock.nowMs() + 60_000);
    const created = await keys.create(caller, {
      name: 'short-lived',
      scopes: ['read'],
      expires_at: expiresAt.toISOString(),
    });
    expect(created.expires_at).toBe(expiresAt.toISOString());
    expect(await keys.authenticate(created.key)).not.toBeNull();
    clock.advance(59_999);
    expect(await keys.authenticate(created.key)).not.toBeNull();
    clock.advance(1);
    expect(await keys.authenticate(created.key)).toBeNull();
  });

  it('revokes a key at once, once, with its audit event', async () => {
    const caller = await userWith(['admin']);
    const created = await keys.create(caller, { name: 'to revoke', scopes: ['read_write'] });
    expect(await keys.authenticate(created.key)).not.toBeNull();

    await keys.revoke(caller, created.id);
    expect(await keys.authenticate(created.key)).toBeNull();
    await expectAppError(keys.revoke(caller, created.id), 'not_found');
    // Another organization's caller cannot revoke (nor learn of) this organization's key.
    const other = await userWith(['admin']);
    const foreign = await keys.create(other, { name: 'foreign', scopes: ['read'] });
    await expectAppError(keys.revoke(caller, foreign.id), 'not_found');

    expect(await auditEvents(caller.organizationId, 'api_key.revoked')).toEqual([
      { target_id: created.id, actor_id: caller.userId, details: { name: 'to revoke' } },
    ]);
    expect((await keys.list(caller.organizationId, 10)).data).toEqual([]);
  });

  it('brings forward the expiry only of a key of the organization named (review)', async () => {
    // A roll reaches expireBy only after locking the key in its caller's organization; the
    // statement holds the organization too, so that no caller can skip that.
    const owner = await userWith(['admin']);
    const stranger = await userWith(['admin']);
    const created = await keys.create(owner, { name: 'kept', scopes: ['read'] });
    const repository = moduleRef.get(ApiKeysRepository);
    const expiresAt = async () =>
      (
        await database.rows<{ expires_at: Date | null }>(
          sql`SELECT expires_at FROM api_keys WHERE id = ${created.id}`,
        )
      )[0].expires_at;
    const endsAt = new Date(Date.parse('2031-01-01T00:00:00Z'));
    await database
      .transaction((manager) =>
        repository.expireBy(manager, created.id, stranger.organizationId, endsAt),
      )
      .catch(() => undefined);
    expect(await expiresAt()).toBeNull();
    await database.transaction((manager) =>
      repository.expireBy(manager, created.id, owner.organizationId, endsAt),
    );
    expect(await expiresAt()).toEqual(endsAt);
  });

  it('rolls a key: the new one works at once, the old one until the overlap window ends', async () => {
    const caller = await userWith(['admin']);
    const old = await keys.create(caller, { name: 'backend', scopes: ['read_write'] });
    const rolledAt = clock.nowMs();
    const rolled = await keys.roll(caller, old.id, 3_600);
    expect(rolled).toEqual(
      expect.objectContaining({ name: 'backend', scopes: ['read_write'], expires_at: null }),
    );
    expect(rolled.id).not.toBe(old.id);
    expect((await keys.authenticate(rolled.key))?.organizationId).toBe(caller.organizationId);

    const [event] = await auditEvents(caller.organizationId, 'api_key.rolled');
    expect(event).toEqual({
      target_id: old.id,
      actor_id: caller.userId,
      details: {
        new_key_id: rolled.id,
        old_key_expires_at: new Date(rolledAt + 3_600_000).toISOString(),
      },
    });
    expect(await auditTimes(caller.organizationId, 'api_key.rolled')).toEqual([
      new Date(rolledAt).toISOString(),
    ]);

    clock.advance(3_599_999);
    expect(await keys.authenticate(old.key)).not.toBeNull();
    clock.advance(1);
    expect(await keys.authenticate(old.key)).toBeNull();
    expect(await keys.authenticate(rolled.key)).not.toBeNull();
    // The old key has ended: it cannot be rolled again.
    await expectAppError(keys.roll(caller, old.id, 60), 'not_found');
  });

  it('rolls with no overlap: the old key is revoked at once; a shorter own expiry is kept', async () => {
    const caller = await userWith(['admin']);
    const old = await keys.create(caller, { name: 'now', scopes: ['read'] });
    const rolled = await keys.roll(caller, old.id, 0);
    expect(await keys.authenticate(old.key)).toBeNull();
    expect(await keys.authenticate(rolled.key)).not.toBeNull();

    const expiresAt = new Date(clock.nowMs() + 10_000);
    const soon = await keys.create(caller, {
      name: 'soon',
      scopes: ['read'],
      expires_at: expiresAt.toISOString(),
    });
    await keys.roll(caller, soon.id, 3_600);
    const [row] = await database.rows<{ expires_at: Date }>(
      sql`SELECT expires_at FROM api_keys WHERE id = ${soon.id}`,
    );
    expect(row.expires_at.toISOString()).toBe(expiresAt.toISOString());
    clock.advance(10_000);
    expect(await keys.authenticate(soon.key)).toBeNull();
  });
});

describe('ApiKeysService keys cached while Redis carries revocations', () => {
  let redis: OwnRedis;
  let moduleRef: TestingModule;
  let keys: ApiKeysService;
  let repository: ApiKeysRepository;
  let factory: Factory;

  beforeAll(async () => {
    redis = await startOwnRedis();
    moduleRef = await moduleAlone([ApiKeysModule], { REDIS_URL: redis.url });
    keys = moduleRef.get(ApiKeysService);
    repository = moduleRef.get(ApiKeysRepository);
    factory = new Factory(moduleRef.get(Database));
  });
  afterAll(async () => {
    await moduleRef?.close();
    await redis.kill();
  });
  afterEach(() => jest.restoreAllMocks());

  it('keeps no key read before its revocation: refused from the next request on', async () => {
    const organizationId = await factory.organization();
    const caller: UserCaller = {
      kind: 'user',
      userId: await factory.member(organizationId, 'owner'),
      organizationId,
      scopes: ['admin'],
      requestId: randomUUID(),
      ip: '192.0.2.10',
    };
    const created = await keys.create(caller, { name: 'leaked', scopes: ['read'] });
    // Renamed: forgotten here, so its next use looks it up.
    await keys.update(caller, created.id, { name: 'leaked key' });

    // A lookup in flight while the key is revoked: it read the key before the revocation.
    let finishRead!: () => void;
    const readHeld = new Promise<void>((resolve) => (finishRead = resolve));
    const find = repository.findUnrevokedByHash.bind(repository);
    jest.spyOn(repository, 'findUnrevokedByHash').mockImplementationOnce(async (hash) => {
      const row = await find(hash);
      await readHeld;
      return row;
    });
    const stale = keys.authenticate(created.key);
    await keys.revoke(caller, created.id);
    finishRead();
    expect(await stale).toMatchObject({ kind: 'api_key', apiKeyId: created.id });
    expect(await keys.authenticate(created.key)).toBeNull();
  });
});
