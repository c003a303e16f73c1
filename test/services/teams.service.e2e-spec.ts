import { randomUUID } from 'node:crypto';
import { organizationPatchAudit } from '../../src/audit/audit-event.step';
import type { TestingModule } from '@nestjs/testing';
import type { UserCaller } from '../../src/common/auth/caller';
import { sha256 } from '../../src/common/crypto/sha256';
import { Clock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import type { Role } from '../../src/organizations/entities/membership.entity';
import { InvitationMailer } from '../../src/organizations/invitation-mailer.service';
import { InvitationsService } from '../../src/organizations/invitations.service';
import { MembersRepository } from '../../src/organizations/members.repository';
import { MembersService } from '../../src/organizations/members.service';
import { OrganizationAccess } from '../../src/organizations/organization-access';
import { OrganizationsModule } from '../../src/organizations/organizations.module';
import { OrganizationsRepository } from '../../src/organizations/organizations.repository';
import { expectAppError } from '../support/assertions';
import { uniqueEmail, userCaller } from '../support/identity';
import { sessionsWaitingForLocks } from '../support/locks';
import { stopClockAt } from '../support/clocks';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';

const TTL_SECONDS = 3_600;

/**
 * The organizations module alone on a real PostgreSQL, without HTTP ("medium" spec): the team
 * rules (docs/teams.md, contract §18) called through MembersService, InvitationsService and
 * OrganizationAccess. Users and memberships are written straight into the database; the
 * invitation token is read from the mailer's call (no SMTP_URL: the mail itself is only logged).
 */
describe('Teams: members and invitations (real database)', () => {
  let moduleRef: TestingModule;
  let members: MembersService;
  let invitations: InvitationsService;
  let access: OrganizationAccess;
  let database: Database;
  let factory: Factory;
  let clock: Clock;
  let mailed: jest.SpyInstance;

  beforeAll(async () => {
    moduleRef = await moduleAlone([OrganizationsModule], {
      SMTP_URL: undefined,
      REDIS_URL: undefined,
      INVITATION_TTL_SECONDS: String(TTL_SECONDS),
    });
    members = moduleRef.get(MembersService);
    invitations = moduleRef.get(InvitationsService);
    access = moduleRef.get(OrganizationAccess);
    database = moduleRef.get(Database);
    clock = moduleRef.get(Clock);
    factory = new Factory(database);
  });
  beforeEach(() => {
    mailed = jest.spyOn(moduleRef.get(InvitationMailer), 'send');
  });
  afterEach(() => jest.restoreAllMocks());
  afterAll(() => moduleRef?.close());

  /** A user with a verified address (inviting needs one). */
  async function user(email = `user-${randomUUID()}@example.test`) {
    const [row] = await database.rows<{ id: string }>(
      sql`INSERT INTO users (email, password_hash, email_verified_at)
          VALUES (${email}, 'not-a-hash', now()) RETURNING id`,
    );
    return { id: row.id, email };
  }

  async function join(organizationId: string, userId: string, role: Role): Promise<void> {
    await database.rows(
      sql`INSERT INTO memberships (organization_id, user_id, role)
          VALUES (${organizationId}, ${userId}, ${role})`,
    );
  }

  /** A fresh organization with a user of each given role, as callers keyed by name. */
  async function team<Name extends string>(roles: Record<Name, Role>) {
    const organizationId = await factory.organization();
    const people = {} as Record<Name, UserCaller & { email: string }>;
    for (const [name, role] of Object.entries(roles) as Array<[Name, Role]>) {
      const person = await user();
      await join(organizationId, person.id, role);
      people[name] = { ...userCaller(person.id, organizationId, role), email: person.email };
    }
    return { organizationId, ...people };
  }

  async function roleOf(organizationId: string, userId: string): Promise<Role | null> {
    const [row] = await database.rows<{ role: Role }>(
      sql`SELECT role FROM memberships
           WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
    );
    return row?.role ?? null;
  }

  async function auditCount(organizationId: string, action: string): Promise<number> {
    const [row] = await database.rows<{ count: number }>(
      sql`SELECT count(*)::int AS count FROM audit_events
           WHERE organization_id = ${organizationId} AND action = ${action}`,
    );
    return row.count;
  }

  /** Invites the address; answers the invitation and the token its mail carried. */
  async function invite(caller: UserCaller, organizationId: string, email: string, role: Role) {
    mailed.mockClear();
    const invitation = await invitations.create(caller, organizationId, { email, role });
    expect(mailed).toHaveBeenCalledTimes(1);
    const [mail, token] = mailed.mock.calls[0] as [{ to: string }, string];
    expect(mail.to).toBe(email.trim());
    return { invitation, token };
  }

  describe('roles', () => {
    it('never removes or demotes the last owner, not even by themself (409 last_owner)', async () => {
      const t = await team({ owner: 'owner', admin: 'admin' });
      await expectAppError(
        members.changeRole(t.owner, t.organizationId, t.owner.userId, 'admin'),
        'last_owner',
      );
      await expectAppError(
        members.changeRole(t.owner, t.organizationId, t.owner.userId, 'member'),
        'last_owner',
      );
      await expectAppError(members.remove(t.owner, t.organizationId, t.owner.userId), 'last_owner');
      expect(await roleOf(t.organizationId, t.owner.userId)).toBe('owner');
      expect(await auditCount(t.organizationId, 'member.role_changed')).toBe(0);
      expect(await auditCount(t.organizationId, 'member.removed')).toBe(0);

      // With a second owner, the first may step down and then leave.
      await members.changeRole(t.owner, t.organizationId, t.admin.userId, 'owner');
      const steppedDown = await members.changeRole(
        t.owner,
        t.organizationId,
        t.owner.userId,
        'admin',
      );
      expect(steppedDown.role).toBe('admin');
      // ...but the new sole owner is now the last one.
      const newOwner = userCaller(t.admin.userId, t.organizationId, 'owner');
      await expectAppError(
        members.remove(newOwner, t.organizationId, newOwner.userId),
        'last_owner',
      );
      expect(await roleOf(t.organizationId, newOwner.userId)).toBe('owner');
    });

    it('lets admins manage members and admins, only owners touch owner, members change no one', async () => {
      const t = await team({
        owner: 'owner',
        admin: 'admin',
        member: 'member',
        other: 'member',
      });
      // A member changes and removes no one else (403 insufficient_role).
      await expectAppError(
        members.changeRole(t.member, t.organizationId, t.other.userId, 'admin'),
        'insufficient_role',
      );
      await expectAppError(
        members.remove(t.member, t.organizationId, t.other.userId),
        'insufficient_role',
      );
      // An admin neither grants owner nor changes or removes an owner.
      await expectAppError(
        members.changeRole(t.admin, t.organizationId, t.member.userId, 'owner'),
        'insufficient_role',
      );
      await expectAppError(
        members.changeRole(t.admin, t.organizationId, t.admin.userId, 'owner'),
        'insufficient_role',
      );
      await expectAppError(
        members.changeRole(t.admin, t.organizationId, t.owner.userId, 'admin'),
        'insufficient_role',
      );
      await expectAppError(
        members.remove(t.admin, t.organizationId, t.owner.userId),
        'insufficient_role',
      );
      expect(await roleOf(t.organizationId, t.owner.userId)).toBe('owner');
      expect(await roleOf(t.organizationId, t.member.userId)).toBe('member');
      expect(await auditCount(t.organizationId, 'member.role_changed')).toBe(0);

      // An admin moves people between member and admin, and removes them.
      expect(
        (await members.changeRole(t.admin, t.organizationId, t.member.userId, 'admin')).role,
      ).toBe('admin');
      expect(
        (await members.changeRole(t.admin, t.organizationId, t.member.userId, 'member')).role,
      ).toBe('member');
      await members.remove(t.admin, t.organizationId, t.other.userId);
      expect(await roleOf(t.organizationId, t.other.userId)).toBeNull();
      // An owner grants owner; the same role again answers the member and writes no event.
      expect(
        (await members.changeRole(t.owner, t.organizationId, t.admin.userId, 'owner')).role,
      ).toBe('owner');
      expect(await auditCount(t.organizationId, 'member.role_changed')).toBe(3);
      expect(
        (await members.changeRole(t.owner, t.organizationId, t.admin.userId, 'owner')).role,
      ).toBe('owner');
      expect(await auditCount(t.organizationId, 'member.role_changed')).toBe(3);
      // A member may leave.
      await members.remove(t.member, t.organizationId, t.member.userId);
      expect(await roleOf(t.organizationId, t.member.userId)).toBeNull();
    });

    it('refuses (401) a member change asked with an access token a password reset ended', async () => {
      const t = await team({ admin: 'admin', member: 'member' });
      await database.rows(sql`UPDATE users SET token_version = 1 WHERE id = ${t.admin.userId}`);
      const ended = { ...t.admin, tokenVersion: 0 };
      await expectAppError(
        members.changeRole(ended, t.organizationId, t.member.userId, 'admin'),
        'unauthenticated',
      );
      await expectAppError(
        members.remove(ended, t.organizationId, t.member.userId),
        'unauthenticated',
      );
      expect(await roleOf(t.organizationId, t.member.userId)).toBe('member');
      // Nor are invitations made, revoked or accepted with it.
      const { invitation, token } = await invite(
        t.admin,
        t.organizationId,
        uniqueEmail(),
        'member',
      );
      await expectAppError(
        invitations.create(ended, t.organizationId, { email: uniqueEmail(), role: 'member' }),
        'unauthenticated',
      );
      await expectAppError(
        invitations.revoke(ended, t.organizationId, invitation.id),
        'unauthenticated',
      );
      const invitee = await user();
      await database.rows(sql`UPDATE users SET token_version = 1 WHERE id = ${invitee.id}`);
      await expectAppError(
        invitations.accept(
          { ...userCaller(invitee.id, t.organizationId, 'member'), tokenVersion: 0 },
          token,
        ),
        'unauthenticated',
      );
      // The token the reset gave holds.
      const current = { ...t.admin, tokenVersion: 1 };
      await members.changeRole(current, t.organizationId, t.member.userId, 'admin');
      expect(await roleOf(t.organizationId, t.member.userId)).toBe('admin');
    });

    it('leaves one owner when two owners demote each other at once', async () => {
      const t = await team({ first: 'owner', second: 'owner' });
      const results = await Promise.allSettled([
        members.changeRole(t.first, t.organizationId, t.second.userId, 'admin'),
        members.changeRole(t.second, t.organizationId, t.first.userId, 'admin'),
      ]);
      expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(1);
      const [refused] = results.filter((result) => result.status === 'rejected');
      expect(refused.reason).toMatchObject({
        code: 'insufficient_role',
      });
      const roles = [
        await roleOf(t.organizationId, t.first.userId),
        await roleOf(t.organizationId, t.second.userId),
      ].sort();
      expect(roles).toEqual(['admin', 'owner']);
    });
  });

  describe('invitations', () => {
    it('stores the token only as its SHA-256: not in the row, the answer or the audit event', async () => {
      const t = await team({ owner: 'owner' });
      const email = `invitee-${randomUUID()}@example.test`;
      const { invitation, token } = await invite(t.owner, t.organizationId, email, 'admin');
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(JSON.stringify(invitation)).not.toContain(token);

      const [row] = await database.rows<{ token_hash: Buffer; whole: string }>(
        sql`SELECT token_hash, row_to_json(i)::text AS whole FROM invitations i
             WHERE id = ${invitation.id}`,
      );
      expect(row.token_hash.equals(sha256(token))).toBe(true);
      expect(row.whole).not.toContain(token);
      expect(row.whole).not.toContain(Buffer.from(token).toString('hex'));
      const events = await database.rows<{ whole: string }>(
        sql`SELECT row_to_json(a)::text AS whole FROM audit_events a
             WHERE organization_id = ${t.organizationId}`,
      );
      expect(events).toHaveLength(1);
      expect(events[0].whole).toContain('member.invited');
      expect(events[0].whole).not.toContain(token);
      expect(events[0].whole).not.toContain(row.token_hash.toString('hex'));
    });

    it('lets exactly one of concurrent acceptances join; the token is then used up', async () => {
      const t = await team({ owner: 'owner' });
      const invitee = await user();
      const { invitation, token } = await invite(t.owner, t.organizationId, invitee.email, 'admin');
      const caller = userCaller(invitee.id, t.organizationId, 'admin');

      const results = await Promise.allSettled(
        Array.from({ length: 5 }, () => invitations.accept(caller, token)),
      );
      const joined = results.filter((result) => result.status === 'fulfilled');
      expect(joined).toHaveLength(1);
      expect((joined[0] as PromiseFulfilledResult<{ id: string; role: string }>).value).toEqual(
        expect.objectContaining({ id: t.organizationId, role: 'admin' }),
      );
      for (const result of results.filter((each) => each.status === 'rejected')) {
        expect(result.reason).toMatchObject({
          code: 'invalid_invitation',
        });
      }
      expect(await roleOf(t.organizationId, invitee.id)).toBe('admin');
      expect(await auditCount(t.organizationId, 'member.joined')).toBe(1);
      await expectAppError(invitations.accept(caller, token), 'invalid_invitation');
      const page = await invitations.list(t.owner, t.organizationId, 10);
      expect(page.data).toEqual([
        expect.objectContaining({ id: invitation.id, status: 'accepted' }),
      ]);
    });

    it('expires at expires_at by the injected clock', async () => {
      const t = await team({ owner: 'owner' });
      const invitee = await user();
      const { invitation, token } = await invite(
        t.owner,
        t.organizationId,
        invitee.email,
        'member',
      );
      const expiresAt = Date.parse(invitation.expires_at);
      expect(expiresAt - Date.parse(invitation.created_at)).toBe(TTL_SECONDS * 1000);
      const caller = userCaller(invitee.id, t.organizationId, 'member');

      stopClockAt(clock, expiresAt);
      await expectAppError(invitations.accept(caller, token), 'invalid_invitation');
      expect((await invitations.list(t.owner, t.organizationId, 10)).data).toEqual([
        expect.objectContaining({ id: invitation.id, status: 'expired' }),
      ]);
      expect(await roleOf(t.organizationId, invitee.id)).toBeNull();

      // A millisecond earlier the same token joins.
      stopClockAt(clock, expiresAt - 1);
      const organization = await invitations.accept(caller, token);
      expect(organization).toEqual(
        expect.objectContaining({ id: t.organizationId, role: 'member' }),
      );
      expect(await roleOf(t.organizationId, invitee.id)).toBe('member');
    });

    it('keeps a pending owner invitation from an admin, not an expired one', async () => {
      const t = await team({ owner: 'owner', admin: 'admin' });
      const invitee = await user();
      const pending = await invite(t.owner, t.organizationId, invitee.email, 'owner');
      await expectAppError(
        invitations.create(t.admin, t.organizationId, { email: invitee.email, role: 'member' }),
        'insufficient_role',
      );
      await expectAppError(
        invitations.revoke(t.admin, t.organizationId, pending.invitation.id),
        'insufficient_role',
      );

      // Expired, it can make no one an owner: the admin replaces it, or revokes it.
      stopClockAt(clock, Date.parse(pending.invitation.expires_at));
      const replaced = await invite(t.admin, t.organizationId, invitee.email, 'member');
      expect(replaced.invitation).toMatchObject({
        id: pending.invitation.id,
        role: 'member',
        status: 'pending',
      });
      await expectAppError(
        invitations.accept(userCaller(invitee.id, t.organizationId, 'member'), pending.token),
        'invalid_invitation',
      );

      const other = await user();
      const expiring = await invite(t.owner, t.organizationId, other.email, 'owner');
      stopClockAt(clock, Date.parse(expiring.invitation.expires_at));
      await invitations.revoke(t.admin, t.organizationId, expiring.invitation.id);
      expect(await auditCount(t.organizationId, 'invitation.revoked')).toBe(1);
    });

    it('refuses another address (invitation_email_mismatch) and stays usable by the invitee, whatever the case', async () => {
      const t = await team({ owner: 'owner' });
      const local = `eve-${randomUUID()}`;
      const invitee = await user(`${local}@example.test`);
      const stranger = await user();
      const { invitation, token } = await invite(
        t.owner,
        t.organizationId,
        `  ${local.toUpperCase()}@EXAMPLE.TEST `,
        'admin',
      );

      await expectAppError(
        invitations.accept(userCaller(stranger.id, t.organizationId, 'admin'), token),
        'invitation_email_mismatch',
      );
      expect(await roleOf(t.organizationId, stranger.id)).toBeNull();
      expect((await invitations.list(t.owner, t.organizationId, 10)).data).toEqual([
        expect.objectContaining({ id: invitation.id, status: 'pending' }),
      ]);

      await invitations.accept(userCaller(invitee.id, t.organizationId, 'admin'), token);
      expect(await roleOf(t.organizationId, invitee.id)).toBe('admin');
    });

    it('refuses to invite a member (already_a_member); one who joined meanwhile keeps their role', async () => {
      const t = await team({ owner: 'owner', admin: 'admin' });
      await expectAppError(
        invitations.create(t.owner, t.organizationId, {
          email: t.admin.email.toUpperCase(),
          role: 'member',
        }),
        'already_a_member',
      );

      const latecomer = await user();
      const { invitation, token } = await invite(
        t.owner,
        t.organizationId,
        latecomer.email,
        'member',
      );
      await join(t.organizationId, latecomer.id, 'admin');
      const organization = await invitations.accept(
        userCaller(latecomer.id, t.organizationId, 'admin'),
        token,
      );
      expect(organization).toEqual(
        expect.objectContaining({ id: t.organizationId, role: 'admin' }),
      );
      expect(await roleOf(t.organizationId, latecomer.id)).toBe('admin');
      expect(await auditCount(t.organizationId, 'member.joined')).toBe(0);
      expect((await invitations.list(t.owner, t.organizationId, 10)).data).toEqual([
        expect.objectContaining({ id: invitation.id, status: 'accepted' }),
      ]);
    });
  });

  /**
   * A demotion to member as changeRole makes it (every membership locked, the role written),
   * held open until `commit()`, which resolves once it has committed.
   */
  async function demotionHeldOpen(organizationId: string, userId: string) {
    let release!: () => void;
    let locked!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const demoted = new Promise<void>((resolve) => (locked = resolve));
    const done = database.transaction(async (manager) => {
      await moduleRef.get(MembersRepository).lockAll(manager, organizationId);
      await database.count(
        sql`UPDATE memberships SET role = 'member'
             WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
        { manager },
      );
      locked();
      await held;
    });
    await Promise.race([demoted, done]);
    return {
      commit: () => {
        release();
        return done;
      },
    };
  }

  describe('an admin demoted meanwhile', () => {
    it('invites and revokes nothing: the role is read under a lock the demotion takes', async () => {
      const t = await team({ owner: 'owner', admin: 'admin' });
      const { invitation } = await invite(
        t.admin,
        t.organizationId,
        `first-${randomUUID()}@example.test`,
        'member',
      );
      const demotion = await demotionHeldOpen(t.organizationId, t.admin.userId);
      const inviting = invitations.create(t.admin, t.organizationId, {
        email: `second-${randomUUID()}@example.test`,
        role: 'admin',
      });
      const revoking = invitations.revoke(t.admin, t.organizationId, invitation.id);
      const settled = Promise.allSettled([inviting, revoking]);
      await sessionsWaitingForLocks(database, 2);
      await demotion.commit();
      const [invited, revoked] = await settled;
      expect(invited).toMatchObject({ status: 'rejected', reason: { code: 'insufficient_role' } });
      expect(revoked).toMatchObject({ status: 'rejected', reason: { code: 'insufficient_role' } });
      expect((await invitations.list(t.owner, t.organizationId, 10)).data).toEqual([
        expect.objectContaining({ id: invitation.id, status: 'pending' }),
      ]);
    });

    it('changes no setting: the write reads the role under the same lock', async () => {
      const t = await team({ owner: 'owner', admin: 'admin', member: 'member' });
      const organizations = moduleRef.get(OrganizationsRepository);
      const retention = async () => {
        const [row] = await database.rows<{ memory_retention_days: number | null }>(
          sql`SELECT memory_retention_days FROM organizations WHERE id = ${t.organizationId}`,
        );
        return row.memory_retention_days;
      };
      const at = new Date();
      const write = (userId: string) =>
        organizations.updateMemoryRetention(
          t.organizationId,
          { userId },
          7,
          at,
          organizationPatchAudit(
            { kind: 'user', userId, organizationId: t.organizationId, scopes: ['admin'] },
            { organizationId: t.organizationId, action: 'organization.updated', at },
            { memory_retention_days: 7 },
          ),
        );
      /** Who the audit log says changed the organization, with what. */
      const audited = () =>
        database.rows(
          sql`SELECT actor_id, details FROM audit_events
               WHERE organization_id = ${t.organizationId} AND action = 'organization.updated'`,
        );
      expect(await write(t.member.userId)).toBeUndefined();
      // An admin whose demotion is in flight: the write waits for it and reads its outcome.
      const demotion = await demotionHeldOpen(t.organizationId, t.admin.userId);
      const writing = write(t.admin.userId);
      await sessionsWaitingForLocks(database, 1);
      await demotion.commit();
      expect(await writing).toBeUndefined();
      expect(await retention()).toBeNull();
      expect(await audited()).toEqual([]);
      expect(await write(t.owner.userId)).toMatchObject({
        memory_retention_days: 7,
        role: 'owner',
      });
      expect(await retention()).toBe(7);
      expect(await audited()).toEqual([
        { actor_id: t.owner.userId, details: { memory_retention_days: 7 } },
      ]);
    });
  });

  it('answers 404 for another organization: its members, invitations and settings', async () => {
    const mine = await team({ owner: 'owner' });
    const theirs = await team({ owner: 'owner', member: 'member' });
    const { invitation } = await invite(
      theirs.owner,
      theirs.organizationId,
      `theirs-${randomUUID()}@example.test`,
      'member',
    );

    // Their organization through its own id: the caller is no member of it.
    await expect(
      members.changeRole(mine.owner, theirs.organizationId, theirs.member.userId, 'admin'),
    ).rejects.toMatchObject({ code: 'not_found', status: 404, message: 'Organization not found' });
    await expectAppError(
      members.remove(mine.owner, theirs.organizationId, theirs.member.userId),
      'not_found',
    );
    await expectAppError(members.list(mine.owner, theirs.organizationId, 10), 'not_found');
    await expectAppError(
      invitations.revoke(mine.owner, theirs.organizationId, invitation.id),
      'not_found',
    );
    // Their member or invitation through my organization's id: none of mine.
    await expect(
      members.changeRole(mine.owner, mine.organizationId, theirs.member.userId, 'admin'),
    ).rejects.toMatchObject({ code: 'not_found', status: 404, message: 'Member not found' });
    await expectAppError(
      members.remove(mine.owner, mine.organizationId, theirs.member.userId),
      'not_found',
    );
    await expectAppError(
      invitations.revoke(mine.owner, mine.organizationId, invitation.id),
      'not_found',
    );
    expect(await roleOf(theirs.organizationId, theirs.member.userId)).toBe('member');
    expect((await invitations.list(theirs.owner, theirs.organizationId, 10)).data).toEqual([
      expect.objectContaining({ id: invitation.id, status: 'pending' }),
    ]);

    // Settings: the path's organization decides, by the caller's role in it, not the token's.
    await expectAppError(access.assert(mine.owner, theirs.organizationId, 'read'), 'not_found');
    await join(theirs.organizationId, mine.owner.userId, 'member');
    await expectAppError(
      access.assert(mine.owner, theirs.organizationId, 'admin'),
      'insufficient_scope',
    );
    await expect(access.assert(mine.owner, theirs.organizationId, 'read_write')).resolves.toBe(
      undefined,
    );
  });
});
