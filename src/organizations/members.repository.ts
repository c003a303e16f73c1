import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Columns, type RowOf } from '../database/columns';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { sql } from '../database/sql';
import type { User } from '../users/entities/user.entity';
import { tokenNoLongerValid, tokenVersionHeld } from '../users/token-version-held';
import type { Membership, Role } from './entities/membership.entity';
import { ORGANIZATION_WITH_ROLE, type OrganizationRoleRow } from './organizations.repository';

/**
 * A membership `m` with its user's (`u`) address and name; `joined_at` is the membership's
 * creation.
 */
const MEMBER = Columns.rowOf<Membership>('m')('userId')
  .and(Columns.rowOf<User>('u')('email', 'name'))
  .and(Columns.rowOf<Membership>('m')('role'))
  .and(Columns.computed<{ joined_at: Membership['createdAt'] }>({ joined_at: sql`m.created_at` }));

export type MemberRow = RowOf<typeof MEMBER>;

const ROLE = Columns.rowOf<Membership>()('role');

const MEMBERSHIP = Columns.rowOf<Membership>()('userId', 'role');

const USER_ADDRESS = Columns.rowOf<User>('u')('id', 'email');

const USER_ID = Columns.rowOf<User>()('id');

/** The SQL of member management (memberships joined with their users). */
@Injectable()
export class MembersRepository {
  constructor(private readonly database: Database) {}

  /** Oldest member first, paged by user id. */
  findPage(organizationId: string, limit: number, startingAfter?: string): Promise<MemberRow[]> {
    const page: Keyset = {
      table: 'memberships',
      alias: 'm',
      id: 'user_id',
      cursor: startingAfter,
      scope: { organization_id: organizationId },
      order: 'asc',
    };
    return this.database.rows(
      MEMBER.query`SELECT ${MEMBER}
            FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = ${organizationId} AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  /** The user's role in the organization, or null (outside a transaction: a plain read). */
  async roleOf(organizationId: string, userId: string): Promise<Role | null> {
    const row = await this.database.row(
      ROLE.query`SELECT ${ROLE} FROM memberships
           WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
    );
    return row?.role ?? null;
  }

  /**
   * First in a transaction acting as a user (a member changed, an invitation made, revoked or
   * accepted, an organization created): 401 when a password reset ended the access token the
   * request was authenticated with (tokenVersionHeld), even a reset that committed while this
   * request ran. The user's row is kept FOR KEY SHARE until the transaction ends, so the reset
   * (FOR UPDATE of the row, then the rest) either committed before and is seen, or waits. Found
   * by review: an ended token still promoted and removed members on an instance whose cached
   * version was a few seconds old.
   */
  async assertActorTokenHolds(
    manager: EntityManager,
    actor: { userId: string; tokenVersion?: number },
  ): Promise<void> {
    const row = await this.database.row(
      USER_ID.query`SELECT ${USER_ID} FROM users
           WHERE id = ${actor.userId} AND ${tokenVersionHeld(sql`token_version`, actor.tokenVersion)}
             FOR KEY SHARE`,
      { manager },
    );
    if (!row) throw tokenNoLongerValid();
  }

  /**
   * Locks every membership of the organization until the transaction ends, in one order (so two
   * changes never deadlock), and answers them: concurrent role changes and removals in one
   * organization then run one after the other, each seeing the owners the previous one left.
   */
  lockAll(
    manager: EntityManager,
    organizationId: string,
  ): Promise<Array<RowOf<typeof MEMBERSHIP>>> {
    return this.database.rows(
      MEMBERSHIP.query`SELECT ${MEMBERSHIP} FROM memberships
           WHERE organization_id = ${organizationId} ORDER BY user_id FOR UPDATE`,
      { manager },
    );
  }

  async updateRole(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    role: Role,
  ): Promise<void> {
    await this.database.count(
      sql`UPDATE memberships SET role = ${role}
           WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
      { manager },
    );
  }

  async remove(manager: EntityManager, organizationId: string, userId: string): Promise<void> {
    await this.database.count(
      sql`DELETE FROM memberships WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
      { manager },
    );
  }

  /**
   * Adds the membership unless the user already has one; answers whether it was added. The one
   * insert of memberships: an organization's first owner and an accepted invitation alike.
   */
  async insertIfAbsent(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    role: Role,
  ): Promise<boolean> {
    const inserted = await this.database.count(
      sql`INSERT INTO memberships (organization_id, user_id, role)
          VALUES (${organizationId}, ${userId}, ${role})
          ON CONFLICT (organization_id, user_id) DO NOTHING`,
      { manager },
    );
    return inserted > 0;
  }

  /**
   * The member, their membership share-locked until the transaction ends: a change of their
   * role or their removal (lockAll) waits for it, so what the transaction does on the strength
   * of the role it read is done under that role, and one that waits reads the role as changed.
   */
  async findMember(
    manager: EntityManager,
    organizationId: string,
    userId: string,
  ): Promise<MemberRow | null> {
    const row = await this.database.row(
      MEMBER.query`SELECT ${MEMBER}
            FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = ${organizationId} AND m.user_id = ${userId}
             FOR SHARE OF m`,
      { manager },
    );
    return row ?? null;
  }

  /** The addresses of the organization's owners and admins (who manage it), by user id. */
  managers(organizationId: string): Promise<Array<RowOf<typeof USER_ADDRESS>>> {
    return this.database.rows(
      USER_ADDRESS.query`SELECT ${USER_ADDRESS}
            FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = ${organizationId} AND m.role IN ('owner', 'admin')
           ORDER BY u.id`,
    );
  }

  /** Whether a user whose address normalises to `emailKey` is a member. */
  async hasMemberWithEmail(
    manager: EntityManager,
    organizationId: string,
    emailKey: string,
  ): Promise<boolean> {
    const found = await this.database.count(
      sql`SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = ${organizationId} AND lower(u.email) = ${emailKey}`,
      { manager },
    );
    return found > 0;
  }

  /** The organization as GET /v1/organizations shows it to this member, or null. */
  async organizationView(
    manager: EntityManager,
    organizationId: string,
    userId: string,
  ): Promise<OrganizationRoleRow | null> {
    const row = await this.database.row(
      ORGANIZATION_WITH_ROLE.query`SELECT ${ORGANIZATION_WITH_ROLE}
            FROM memberships m JOIN organizations o ON o.id = m.organization_id
           WHERE m.organization_id = ${organizationId} AND m.user_id = ${userId}`,
      { manager },
    );
    return row ?? null;
  }
}
