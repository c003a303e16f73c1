import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import type { Row } from '../database/row';
import { raw, sql } from '../database/sql';
import type { User } from '../users/entities/user.entity';
import type { Membership, Role } from './entities/membership.entity';
import type { OrganizationRoleRow } from './organizations.repository';

/** A membership with its user's address and name; `joined_at` is the membership's creation. */
export type MemberRow = Row<Membership, 'userId' | 'role'> &
  Row<User, 'email' | 'name'> & { joined_at: Membership['createdAt'] };

const MEMBER_COLUMNS = raw('m.user_id, u.email, u.name, m.role, m.created_at AS joined_at');

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
    return this.database.rows<MemberRow>(
      sql`SELECT ${MEMBER_COLUMNS}
            FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = ${organizationId} AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  /** The user's role in the organization, or null (outside a transaction: a plain read). */
  async roleOf(organizationId: string, userId: string): Promise<Role | null> {
    const row = await this.database.row<Row<Membership, 'role'>>(
      sql`SELECT role FROM memberships
           WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
    );
    return row?.role ?? null;
  }

  /**
   * Locks every membership of the organization until the transaction ends, in one order (so two
   * changes never deadlock), and answers them: concurrent role changes and removals in one
   * organization then run one after the other, each seeing the owners the previous one left.
   */
  lockAll(
    manager: EntityManager,
    organizationId: string,
  ): Promise<Array<Row<Membership, 'userId' | 'role'>>> {
    return this.database.rows(
      sql`SELECT user_id, role FROM memberships WHERE organization_id = ${organizationId}
           ORDER BY user_id FOR UPDATE`,
      { manager },
    );
  }

  async updateRole(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    role: Role,
  ): Promise<void> {
    await this.database.rows(
      sql`UPDATE memberships SET role = ${role}
           WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
      { manager },
    );
  }

  async remove(manager: EntityManager, organizationId: string, userId: string): Promise<void> {
    await this.database.rows(
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

  async findMember(
    manager: EntityManager,
    organizationId: string,
    userId: string,
  ): Promise<MemberRow | null> {
    const row = await this.database.row<MemberRow>(
      sql`SELECT ${MEMBER_COLUMNS}
            FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = ${organizationId} AND m.user_id = ${userId}`,
      { manager },
    );
    return row ?? null;
  }

  /** The addresses of the organization's owners and admins (who manage it), by user id. */
  managers(organizationId: string): Promise<Array<Row<User, 'id' | 'email'>>> {
    return this.database.rows(
      sql`SELECT u.id, u.email FROM memberships m JOIN users u ON u.id = m.user_id
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
    const row = await this.database.row(
      sql`SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
           WHERE m.organization_id = ${organizationId} AND lower(u.email) = ${emailKey}`,
      { manager },
    );
    return row !== undefined;
  }

  /** The organization as GET /v1/organizations shows it to this member, or null. */
  async organizationView(
    manager: EntityManager,
    organizationId: string,
    userId: string,
  ): Promise<OrganizationRoleRow | null> {
    const row = await this.database.row<OrganizationRoleRow>(
      sql`SELECT o.id, o.name, m.role, o.memory_retention_days, o.created_at
            FROM memberships m JOIN organizations o ON o.id = m.organization_id
           WHERE m.organization_id = ${organizationId} AND m.user_id = ${userId}`,
      { manager },
    );
    return row ?? null;
  }
}
