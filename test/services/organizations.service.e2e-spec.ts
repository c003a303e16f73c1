import { randomUUID } from 'node:crypto';
import type { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { AppError } from '../../src/common/errors/app-error';
import { Clock, ManualClock } from '../../src/common/time/clock';
import { createValidationPipe } from '../../src/common/validation/validation.pipe';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import {
  CreateOrganizationDto,
  UpdateOrganizationDto,
} from '../../src/organizations/dto/organization.dto';
import type { Role } from '../../src/organizations/entities/membership.entity';
import { OrganizationsNameTheirCreator1795923000000 } from '../../src/database/migrations/1795923000000-OrganizationsNameTheirCreator';
import { OrganizationsModule } from '../../src/organizations/organizations.module';
import { OrganizationsRepository } from '../../src/organizations/organizations.repository';
import { OrganizationsService } from '../../src/organizations/organizations.service';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { userCaller } from '../support/identity';
import { sessionsWaitingForLocks } from '../support/locks';
import { revertAndRerun } from '../support/migration-rerun';
import { moduleAlone } from '../support/module-alone';
import { type OwnRedis, startOwnRedis } from '../support/redis-server';
import { eventually } from '../support/wait';

/** ORGANIZATIONS_PER_USER for this spec: small, so the cap is reached in a few creations. */
const CAP = 3;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The organizations module alone on a real PostgreSQL, without HTTP ("medium" spec):
 * OrganizationsService's rules (docs/identity.md "Organizations per user", docs/teams.md,
 * docs/memory.md's retention setting) called directly, checked against the rows it writes. No
 * REDIS_URL: memberships are read from the database on every call. Time is a ManualClock.
 */
describe('OrganizationsService (real database)', () => {
  const clock = new ManualClock(Date.parse('2031-03-14T09:26:53.589Z'));
  const pipe = createValidationPipe();
  let moduleRef: TestingModule;
  let organizations: OrganizationsService;
  let repository: OrganizationsRepository;
  let database: Database;
  let factory: Factory;

  beforeAll(async () => {
    moduleRef = await moduleAlone(
      [OrganizationsModule],
      { SMTP_URL: undefined, REDIS_URL: undefined, ORGANIZATIONS_PER_USER: String(CAP) },
      (builder) => builder.overrideProvider(Clock).useValue(clock),
    );
    organizations = moduleRef.get(OrganizationsService);
    repository = moduleRef.get(OrganizationsRepository);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterEach(() => jest.restoreAllMocks());
  afterAll(() => moduleRef?.close());

  /** A user of no organization (a verified address), `created` organizations already made. */
  async function user(created = 0): Promise<string> {
    const [row] = await database.rows<{ id: string }>(
      sql`INSERT INTO users (email, password_hash, email_verified_at, organizations_created)
          VALUES (${`user-${randomUUID()}@example.test`}, 'not-a-hash', now(), ${created})
          RETURNING id`,
    );
    return row.id;
  }

  async function join(
    organizationId: string,
    userId: string,
    role: Role,
    createdAt?: string,
  ): Promise<void> {
    await database.rows(
      sql`INSERT INTO memberships (organization_id, user_id, role, created_at)
          VALUES (${organizationId}, ${userId}, ${role},
                  coalesce(${createdAt ?? null}::timestamptz, now()))`,
    );
  }

  async function setRole(organizationId: string, userId: string, role: Role): Promise<void> {
    await database.rows(
      sql`UPDATE memberships SET role = ${role}
           WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
    );
  }

  async function counted(userId: string): Promise<number> {
    const [row] = await database.rows<{ organizations_created: number }>(
      sql`SELECT organizations_created FROM users WHERE id = ${userId}`,
    );
    return row.organizations_created;
  }

  /** The organizations the user belongs to, with their role, by name. */
  async function memberships(userId: string): Promise<Array<{ name: string; role: Role }>> {
    return database.rows(
      sql`SELECT o.name, m.role FROM memberships m JOIN organizations o ON o.id = m.organization_id
           WHERE m.user_id = ${userId} ORDER BY o.name`,
    );
  }

  async function organizationsNamed(name: string): Promise<number> {
    const [row] = await database.rows<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM organizations WHERE name = ${name}`,
    );
    return row.n;
  }

  async function retention(organizationId: string) {
    const [row] = await database.rows<{ memory_retention_days: number | null; updated_at: Date }>(
      sql`SELECT memory_retention_days, updated_at FROM organizations WHERE id = ${organizationId}`,
    );
    return row;
  }

  /** A fresh organization with a user of each role, as callers acting for it. */
  async function team() {
    const organizationId = await factory.organization();
    const caller = async (role: Role) =>
      userCaller(await factory.member(organizationId, role), organizationId, role);
    return {
      organizationId,
      owner: await caller('owner'),
      admin: await caller('admin'),
      member: await caller('member'),
    };
  }

  /** The body as the controller receives it: through the application's validation pipe. */
  function updateBody(body: unknown): Promise<UpdateOrganizationDto> {
    return pipe.transform(body, {
      type: 'body',
      metatype: UpdateOrganizationDto,
    }) as Promise<UpdateOrganizationDto>;
  }

  describe('creation, ORGANIZATIONS_PER_USER', () => {
    it('makes the user its owner and answers the organization as its owner sees it', async () => {
      const userId = await user();
      const name = `Acme ${randomUUID()}`;
      const created = await organizations.create({ userId }, name);
      expect(created).toEqual({
        id: expect.stringMatching(UUID),
        name,
        role: 'owner',
        memory_retention_days: null,
        created_at: expect.any(String),
      });
      expect(new Date(created.created_at).toISOString()).toBe(created.created_at);
      expect(await memberships(userId)).toEqual([{ name, role: 'owner' }]);
      expect(await counted(userId)).toBe(1);
      expect(await organizations.membership(userId, created.id)).toEqual({
        organizationId: created.id,
        role: 'owner',
      });
    });

    it("begins the organization's audit log with organization.created, by its creator, from their request", async () => {
      const userId = await user();
      const name = `Audited ${randomUUID()}`;
      const created = await organizations.create(
        { userId, requestId: 'req-created', ip: '203.0.113.9' },
        name,
      );
      expect(
        await database.rows<Record<string, unknown>>(
          sql`SELECT action, actor_type, actor_id, target_type, target_id, ip, request_id, details,
                     created_at
                FROM audit_events WHERE organization_id = ${created.id}`,
        ),
      ).toEqual([
        {
          action: 'organization.created',
          actor_type: 'user',
          actor_id: userId,
          target_type: 'organization',
          target_id: created.id,
          ip: '203.0.113.9',
          request_id: 'req-created',
          details: { name },
          created_at: clock.now(),
        },
      ]);
    });

    it('refuses (401) a creation asked with an access token a password reset ended, writing nothing', async () => {
      const userId = await user();
      await database.rows(sql`UPDATE users SET token_version = 1 WHERE id = ${userId}`);
      const name = `Ended ${randomUUID()}`;
      await expectAppError(
        organizations.create({ userId, tokenVersion: 0 }, name),
        'unauthenticated',
      );
      expect(await organizationsNamed(name)).toBe(0);
      expect(await counted(userId)).toBe(0);
      // The token the reset gave holds.
      await expect(organizations.create({ userId, tokenVersion: 1 }, name)).resolves.toMatchObject({
        name,
      });
    });

    it.each([
      ['spaces', '   '],
      ['zero-width spaces', '\u200b\u200b'],
      ['a Hangul filler', '\u3164'],
    ])('refuses a name of %s (400): it would list as a blank row', async (_, name) => {
      await expect(
        pipe.transform({ name }, { type: 'body', metatype: CreateOrganizationDto }),
      ).rejects.toMatchObject({
        code: 'validation_failed',
        details: [
          {
            field: 'name',
            problem: 'name must hold a visible character, not only spaces or invisible ones',
          },
        ],
      });
    });

    it('refuses the creation past the cap with 409 organization_limit, writing nothing', async () => {
      const userId = await user();
      for (let i = 0; i < CAP; i++) await organizations.create({ userId }, `mine ${i} ${userId}`);
      const refusedName = `one too many ${userId}`;
      const refused = organizations.create({ userId }, refusedName);
      await expectAppError(refused, 'organization_limit');
      await expect(refused).rejects.toMatchObject({
        message: expect.stringContaining(`at most ${CAP} organizations`),
      });
      expect(await organizationsNamed(refusedName)).toBe(0);
      expect(await counted(userId)).toBe(CAP);
      expect(await memberships(userId)).toHaveLength(CAP);
    });

    it('lets concurrent creations pass the cap together never: exactly the slots left succeed', async () => {
      for (const already of [0, CAP - 1]) {
        const userId = await user(already);
        const outcomes = await Promise.allSettled(
          Array.from({ length: 10 }, (_, i) =>
            organizations.create({ userId }, `race ${i} ${userId}`),
          ),
        );
        const passed = outcomes.filter((outcome) => outcome.status === 'fulfilled');
        const refused = outcomes.flatMap((outcome) =>
          outcome.status === 'rejected' ? [outcome.reason as unknown] : [],
        );
        expect({ already, passed: passed.length }).toEqual({ already, passed: CAP - already });
        for (const reason of refused) {
          expect(reason).toBeInstanceOf(AppError);
          expect((reason as AppError).code).toBe('organization_limit');
        }
        expect(await counted(userId)).toBe(CAP);
        expect(await memberships(userId)).toHaveLength(CAP - already);
      }
    });

    it('counts creations, not memberships: leaving gives no slot back, joining takes none', async () => {
      const userId = await user();
      // Member (by invitation) of more organizations than the cap: no slot used.
      for (let i = 0; i < CAP + 1; i++) await join(await factory.organization(), userId, 'member');
      const made = [];
      for (let i = 0; i < CAP; i++) made.push(await organizations.create({ userId }, `own ${i}`));
      expect(await counted(userId)).toBe(CAP);
      // Leaving every organization made: the creations still count.
      await database.rows(
        sql`DELETE FROM memberships WHERE user_id = ${userId} AND role = 'owner'`,
      );
      await expectAppError(organizations.create({ userId }, 'after leaving'), 'organization_limit');
      expect(made.map((organization) => organization.role)).toEqual(['owner', 'owner', 'owner']);
    });

    it("counts in the caller's transaction: a creation rolled back with it uses no slot", async () => {
      const userId = await user(CAP - 1);
      const name = `rolled back ${userId}`;
      await expect(
        database.transaction(async (manager) => {
          await organizations.createWithOwner(manager, { userId }, name);
          throw new Error('sign-up failed after the organization');
        }),
      ).rejects.toThrow('sign-up failed after the organization');
      expect(await organizationsNamed(name)).toBe(0);
      expect(await counted(userId)).toBe(CAP - 1);
      expect(
        await database.rows(
          sql`SELECT 1 FROM audit_events WHERE action = 'organization.created' AND details->>'name' = ${name}`,
        ),
      ).toEqual([]);
      // The slot is still there.
      await expect(organizations.create({ userId }, name)).resolves.toMatchObject({ name });
      await expectAppError(organizations.create({ userId }, 'next'), 'organization_limit');
    });
  });

  describe('listForUser', () => {
    it("lists the user's organizations with their role, oldest membership first, paged", async () => {
      const userId = await user();
      const other = await user();
      const ids: string[] = [];
      const roles: Role[] = ['member', 'owner', 'admin', 'member', 'owner'];
      for (const [i, role] of roles.entries()) {
        const organizationId = await factory.organization();
        ids.push(organizationId);
        // Two share a time: the organization id breaks the tie.
        await join(organizationId, userId, role, `2031-01-0${Math.min(i, 3) + 1}T00:00:00Z`);
        await join(organizationId, other, 'member');
      }
      const tied = [ids[3], ids[4]].sort();
      const order = [ids[0], ids[1], ids[2], ...tied];
      const roleOf = new Map(ids.map((id, i) => [id, roles[i]]));

      const seen: string[] = [];
      let cursor: string | undefined;
      const hasMore: boolean[] = [];
      do {
        const page = await organizations.listForUser(userId, 2, cursor);
        for (const item of page.data) {
          expect(item.role).toBe(roleOf.get(item.id));
          expect(item.memory_retention_days).toBeNull();
        }
        seen.push(...page.data.map((item) => item.id));
        hasMore.push(page.has_more);
        cursor = page.has_more ? page.data.at(-1)!.id : undefined;
      } while (cursor);
      expect(seen).toEqual(order);
      expect(hasMore).toEqual([true, true, false]);

      // A cursor naming an organization the user is not in positions nothing.
      const stranger = await factory.organization();
      expect(await organizations.listForUser(userId, 10, stranger)).toEqual({
        data: [],
        has_more: false,
      });
      expect(await organizations.listForUser(await user(), 10)).toEqual({
        data: [],
        has_more: false,
      });
    });
  });

  describe('setMemoryRetention', () => {
    it('lets owners and admins set and clear it; answers the organization with their role', async () => {
      const t = await team();
      const [before] = await database.rows<{ name: string; created_at: Date }>(
        sql`SELECT name, created_at FROM organizations WHERE id = ${t.organizationId}`,
      );
      const byOwner = await organizations.setMemoryRetention(t.owner, t.organizationId, 30);
      expect(byOwner).toEqual({
        id: t.organizationId,
        name: before.name,
        role: 'owner',
        memory_retention_days: 30,
        created_at: before.created_at.toISOString(),
      });
      expect(await retention(t.organizationId)).toEqual({
        memory_retention_days: 30,
        updated_at: clock.now(),
      });

      clock.advance(60_000);
      const byAdmin = await organizations.setMemoryRetention(t.admin, t.organizationId, 3650);
      expect(byAdmin).toMatchObject({ role: 'admin', memory_retention_days: 3650 });
      expect(await retention(t.organizationId)).toEqual({
        memory_retention_days: 3650,
        updated_at: clock.now(),
      });
      const cleared = await organizations.setMemoryRetention(t.admin, t.organizationId, null);
      expect(cleared).toMatchObject({ role: 'admin', memory_retention_days: null });
      expect((await retention(t.organizationId)).memory_retention_days).toBeNull();
      // Listed as it is now.
      const listed = await organizations.listForUser(t.member.userId, 10);
      expect(listed.data).toEqual([{ ...cleared, role: 'member' }]);
    });

    it('refuses a member with 403 insufficient_scope and a non-member with 404, changing nothing', async () => {
      const t = await team();
      await organizations.setMemoryRetention(t.owner, t.organizationId, 90);
      const stamped = await retention(t.organizationId);
      clock.advance(1_000);

      await expectAppError(
        organizations.setMemoryRetention(t.member, t.organizationId, 1),
        'insufficient_scope',
      );
      // The owner of another organization, acting for it or naming this one.
      const outsider = await team();
      await expectAppError(
        organizations.setMemoryRetention(outsider.owner, t.organizationId, 1),
        'not_found',
      );
      await expectAppError(
        organizations.setMemoryRetention(
          { ...outsider.owner, organizationId: t.organizationId },
          t.organizationId,
          1,
        ),
        'not_found',
      );
      // An organization that does not exist reads the same.
      await expectAppError(organizations.setMemoryRetention(t.owner, randomUUID(), 1), 'not_found');
      // A caller whose own scopes say admin is still judged by their role in the organization.
      await expectAppError(
        organizations.setMemoryRetention({ ...t.member, scopes: ['admin'] }, t.organizationId, 1),
        'insufficient_scope',
      );
      expect(await retention(t.organizationId)).toEqual(stamped);
    });

    it('holds from the next call after a demotion or removal (no membership cached without Redis)', async () => {
      const t = await team();
      await organizations.setMemoryRetention(t.admin, t.organizationId, 10);
      await setRole(t.organizationId, t.admin.userId, 'member');
      await expectAppError(
        organizations.setMemoryRetention(t.admin, t.organizationId, 20),
        'insufficient_scope',
      );
      await setRole(t.organizationId, t.admin.userId, 'admin');
      await organizations.setMemoryRetention(t.admin, t.organizationId, 20);
      await database.rows(
        sql`DELETE FROM memberships
             WHERE organization_id = ${t.organizationId} AND user_id = ${t.admin.userId}`,
      );
      await expectAppError(
        organizations.setMemoryRetention(t.admin, t.organizationId, 30),
        'not_found',
      );
      expect((await retention(t.organizationId)).memory_retention_days).toBe(20);
    });

    it('a demotion or removal in flight is waited for: its outcome decides, not the earlier check', async () => {
      for (const change of ['demotion', 'removal'] as const) {
        const t = await team();
        const holder = new Client({ connectionString: process.env.DATABASE_URL });
        await holder.connect();
        try {
          await holder.query('BEGIN');
          await holder.query(
            change === 'demotion'
              ? `UPDATE memberships SET role = 'member' WHERE organization_id = $1 AND user_id = $2`
              : `DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2`,
            [t.organizationId, t.admin.userId],
          );
          // The role check reads the committed admin role; the write waits on the row.
          const setting = organizations.setMemoryRetention(t.admin, t.organizationId, 7).then(
            () => undefined,
            (error: unknown) => error,
          );
          await sessionsWaitingForLocks(database, 1);
          await holder.query('COMMIT');
          const error = await setting;
          expect({ change, error }).toEqual({ change, error: expect.any(AppError) });
          expect((error as AppError).code).toBe(
            change === 'demotion' ? 'insufficient_scope' : 'not_found',
          );
        } finally {
          await holder.end();
        }
        expect((await retention(t.organizationId)).memory_retention_days).toBeNull();
      }
    });

    it('a role lost between the check and the write but back before the re-check: written', async () => {
      const t = await team();
      const write = repository.updateMemoryRetention.bind(repository);
      jest.spyOn(repository, 'updateMemoryRetention').mockImplementationOnce(async (...args) => {
        await setRole(t.organizationId, t.admin.userId, 'member');
        const refused = await write(...args);
        await setRole(t.organizationId, t.admin.userId, 'admin');
        return refused;
      });
      const answer = await organizations.setMemoryRetention(t.admin, t.organizationId, 45);
      expect(answer).toMatchObject({ role: 'admin', memory_retention_days: 45 });
      expect(repository.updateMemoryRetention).toHaveBeenCalledTimes(2);
      expect((await retention(t.organizationId)).memory_retention_days).toBe(45);
    });

    it('takes whole days from 1 to 3650, or null: the body is validated, the database checks too', async () => {
      for (const valid of [1, 3650, null]) {
        await expect(updateBody({ memory_retention_days: valid })).resolves.toEqual({
          memory_retention_days: valid,
        });
      }
      const invalid: unknown[] = [
        {},
        { memory_retention_days: 0 },
        { memory_retention_days: -1 },
        { memory_retention_days: 3651 },
        { memory_retention_days: 1.5 },
        { memory_retention_days: '30' },
        { memory_retention_days: true },
        { memory_retention_days: [30] },
        { memory_retention_days: 30, name: 'renamed' },
      ];
      for (const body of invalid) {
        const error = await updateBody(body).then(
          () => undefined,
          (thrown: unknown) => thrown,
        );
        expect({ body, code: (error as AppError | undefined)?.code }).toEqual({
          body,
          code: 'validation_failed',
        });
      }
      // Past the pipe (a caller of the service), out-of-range days still change nothing.
      const t = await team();
      await organizations.setMemoryRetention(t.owner, t.organizationId, 12);
      for (const days of [0, 3651]) {
        await expect(
          organizations.setMemoryRetention(t.owner, t.organizationId, days),
        ).rejects.toThrow(/organizations_memory_retention_days_range/);
      }
      expect((await retention(t.organizationId)).memory_retention_days).toBe(12);
    });
  });

  describe('membership', () => {
    it('answers the role in the named organization, null when not a member; read every time', async () => {
      const t = await team();
      const grant = (userId: string) => organizations.membership(userId, t.organizationId);
      expect(await grant(t.admin.userId)).toEqual({
        organizationId: t.organizationId,
        role: 'admin',
      });
      expect(await grant(await user())).toBeNull();
      expect(await organizations.membership(t.admin.userId, randomUUID())).toBeNull();

      // No Redis: nothing cached, each change is seen by the next call.
      await setRole(t.organizationId, t.admin.userId, 'member');
      expect(await grant(t.admin.userId)).toEqual({
        organizationId: t.organizationId,
        role: 'member',
      });
      await database.rows(
        sql`DELETE FROM memberships
             WHERE organization_id = ${t.organizationId} AND user_id = ${t.admin.userId}`,
      );
      expect(await grant(t.admin.userId)).toBeNull();
      await join(t.organizationId, t.admin.userId, 'owner');
      expect(await grant(t.admin.userId)).toEqual({
        organizationId: t.organizationId,
        role: 'owner',
      });
      // Forgetting needs no Redis to resolve.
      await expect(organizations.forgetMemberships(t.admin.userId)).resolves.toBeUndefined();
    });

    it('without an organization named: the first one joined (ties by organization id)', async () => {
      const userId = await user();
      expect(await organizations.membership(userId)).toBeNull();
      const [later, first, tiedA, tiedB] = await Promise.all(
        Array.from({ length: 4 }, () => factory.organization()),
      );
      await join(later, userId, 'owner', '2031-02-02T00:00:00Z');
      await join(first, userId, 'member', '2031-02-01T00:00:00Z');
      expect(await organizations.membership(userId)).toEqual({
        organizationId: first,
        role: 'member',
      });
      // Leaving the first: the next one, read at once.
      await database.rows(
        sql`DELETE FROM memberships WHERE organization_id = ${first} AND user_id = ${userId}`,
      );
      expect(await organizations.membership(userId)).toEqual({
        organizationId: later,
        role: 'owner',
      });
      await join(tiedA, userId, 'admin', '2031-01-01T00:00:00Z');
      await join(tiedB, userId, 'admin', '2031-01-01T00:00:00Z');
      expect(await organizations.membership(userId)).toEqual({
        organizationId: [tiedA, tiedB].sort()[0],
        role: 'admin',
      });
    });

    it('sees an organization the user just created, as its owner', async () => {
      const userId = await user();
      expect(await organizations.membership(userId)).toBeNull();
      const created = await organizations.create({ userId }, 'first');
      expect(await organizations.membership(userId)).toEqual({
        organizationId: created.id,
        role: 'owner',
      });
    });
  });

  describe('rateLimitOverride', () => {
    it("answers the organization's own bucket size, nulls for the defaults or no organization", async () => {
      const organizationId = await factory.organization();
      expect(await organizations.rateLimitOverride(organizationId)).toEqual({
        rps: null,
        burst: null,
      });
      await database.rows(
        sql`UPDATE organizations SET rate_limit_rps = 25, rate_limit_burst = 80
             WHERE id = ${organizationId}`,
      );
      expect(await organizations.rateLimitOverride(organizationId)).toEqual({
        rps: 25,
        burst: 80,
      });
      expect(await organizations.rateLimitOverride(randomUUID())).toEqual({
        rps: null,
        burst: null,
      });
    });
  });

  describe('accountOf', () => {
    it('answers the user who made the organization: one for all they made, whoever owns them later', async () => {
      const maker = await user();
      const first = await organizations.create({ userId: maker }, 'one');
      const second = await organizations.create({ userId: maker }, 'two');
      expect(await organizations.accountOf(first.id)).toBe(maker);
      expect(await organizations.accountOf(second.id)).toBe(maker);

      // The maker promotes a member and steps down: the organization stays in the maker's account
      // (by its owners, it moved into the member's, whose own uploads then waited behind it).
      const promoted = await user();
      await join(first.id, promoted, 'member');
      await setRole(first.id, promoted, 'owner');
      await setRole(first.id, maker, 'admin');
      expect(await organizations.accountOf(first.id)).toBe(maker);
      const own = await organizations.create({ userId: promoted }, 'theirs');
      expect(await organizations.accountOf(own.id)).toBe(promoted);

      // No maker recorded (written by the previous release, or its user gone): the earliest
      // member, as the migration gave older organizations; with no member, itself.
      const unmade = await factory.organization();
      const [earliest, next] = [await user(), await user()];
      await join(unmade, next, 'owner', '2030-01-02T00:00:00Z');
      await join(unmade, earliest, 'member', '2030-01-01T00:00:00Z');
      expect(await organizations.accountOf(unmade)).toBe(earliest);
      const empty = await factory.organization();
      expect(await organizations.accountOf(empty)).toBe(empty);
    });

    it('is given to organizations made before (or by the previous release) by a migration that can run again', async () => {
      const [maker, joinedLater] = [await user(), await user()];
      let made = '';
      let memberless = '';
      await revertAndRerun(
        moduleRef.get(DataSource),
        new OrganizationsNameTheirCreator1795923000000(),
        async () => {
          // As the previous release makes them: no maker written.
          made = await factory.organization();
          await join(made, joinedLater, 'owner', '2030-01-02T00:00:00Z');
          await join(made, maker, 'admin', '2030-01-01T00:00:00Z');
          memberless = await factory.organization();
        },
      );
      const rows = await database.rows<{ id: string; created_by_user_id: string | null }>(
        sql`SELECT id, created_by_user_id FROM organizations WHERE id IN (${made}, ${memberless})`,
      );
      expect(Object.fromEntries(rows.map((row) => [row.id, row.created_by_user_id]))).toEqual({
        [made]: maker,
        [memberless]: null,
      });
      const [schema] = await database.rows<{ validated: boolean; valid: boolean }>(
        sql`SELECT (SELECT convalidated FROM pg_constraint
                     WHERE conname = 'organizations_created_by_user_id_fkey') AS validated,
                   (SELECT indisvalid FROM pg_index
                     WHERE indexrelid = 'organizations_created_by_user_idx'::regclass) AS valid`,
      );
      expect(schema).toEqual({ validated: true, valid: true });
    });
  });
});

describe('OrganizationsService memberships cached while Redis carries changes', () => {
  let redis: OwnRedis;
  let moduleRef: TestingModule;
  let organizations: OrganizationsService;
  let repository: OrganizationsRepository;
  let database: Database;
  let factory: Factory;

  beforeAll(async () => {
    redis = await startOwnRedis();
    moduleRef = await moduleAlone([OrganizationsModule], {
      SMTP_URL: undefined,
      REDIS_URL: redis.url,
    });
    organizations = moduleRef.get(OrganizationsService);
    repository = moduleRef.get(OrganizationsRepository);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterAll(async () => {
    await moduleRef.close();
    await redis.kill();
  });
  afterEach(() => jest.restoreAllMocks());

  it('keeps no grant read before the membership was forgotten (a removal holds at once)', async () => {
    const organizationId = await factory.organization();
    const userId = await factory.member(organizationId, 'admin');
    const grant = () => organizations.membership(userId, organizationId);
    // Cached once the subscription is live: a second read answers without the database.
    await eventually(async () => {
      await grant();
      const reads = jest.spyOn(repository, 'findGrant');
      await grant();
      const cached = reads.mock.calls.length === 0;
      reads.mockRestore();
      return cached || undefined;
    }, 'the membership cached');
    await organizations.forgetMemberships(userId);

    // A read in flight while the member is removed and forgotten: it read the old role.
    let finishRead!: () => void;
    const readHeld = new Promise<void>((resolve) => (finishRead = resolve));
    const findGrant = repository.findGrant.bind(repository);
    jest.spyOn(repository, 'findGrant').mockImplementationOnce(async (...args) => {
      const row = await findGrant(...args);
      await readHeld;
      return row;
    });
    const stale = grant();
    await database.rows(
      sql`DELETE FROM memberships WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
    );
    await organizations.forgetMemberships(userId);
    finishRead();
    expect(await stale).toEqual({ organizationId, role: 'admin' });
    // The next request is refused: the stale read was not kept.
    expect(await grant()).toBeNull();
  });
});
