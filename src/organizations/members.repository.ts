import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { Role } from './entities/membership.entity';

export interface MemberRow {
  user_id: string;
  email: string;
  name: string | null;
  role: Role;
  joined_at: Date;
}

export interface OrganizationRow {
  id: string;
  name: string;
  role: Role;
  created_at: Date;
}

const MEMBER_COLUMNS = 'm.user_id, u.email, u.name, m.role, m.created_at AS joined_at';

/** The SQL of member management (memberships joined with their users). */
@Injectable()
export class MembersRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Oldest member first, paged by user id. */
  findPage(organizationId: string, limit: number, startingAfter?: string): Promise<MemberRow[]> {
    return this.dataSource.query(
      `SELECT ${MEMBER_COLUMNS}
         FROM memberships m JOIN users u ON u.id = m.user_id
        WHERE m.organization_id = $1
          AND ($2::uuid IS NULL OR (m.created_at, m.user_id) > (
                SELECT m2.created_at, m2.user_id FROM memberships m2
                 WHERE m2.organization_id = $1 AND m2.user_id = $2::uuid))
        ORDER BY m.created_at, m.user_id
        LIMIT $3`,
      [organizationId, startingAfter ?? null, limit + 1],
    );
  }

  /** The user's role in the organization, or null (outside a transaction: a plain read). */
  async roleOf(organizationId: string, userId: string): Promise<Role | null> {
    const rows: Array<{ role: Role }> = await this.dataSource.query(
      'SELECT role FROM memberships WHERE organization_id = $1 AND user_id = $2',
      [organizationId, userId],
    );
    return rows[0]?.role ?? null;
  }

  /**
   * Locks every membership of the organization until the transaction ends, in one order (so two
   * changes never deadlock), and answers them: concurrent role changes and removals in one
   * organization then run one after the other, each seeing the owners the previous one left.
   */
  lockAll(
    manager: EntityManager,
    organizationId: string,
  ): Promise<Array<{ user_id: string; role: Role }>> {
    return manager.query(
      `SELECT user_id, role FROM memberships WHERE organization_id = $1 ORDER BY user_id FOR UPDATE`,
      [organizationId],
    );
  }

  async updateRole(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    role: Role,
  ): Promise<void> {
    await manager.query(
      'UPDATE memberships SET role = $3 WHERE organization_id = $1 AND user_id = $2',
      [organizationId, userId, role],
    );
  }

  async remove(manager: EntityManager, organizationId: string, userId: string): Promise<void> {
    await manager.query('DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2', [
      organizationId,
      userId,
    ]);
  }

  /** Adds the membership unless the user already has one; answers whether it was added. */
  async insertIfAbsent(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    role: Role,
  ): Promise<boolean> {
    const rows: unknown[] = await manager.query(
      `INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, $3)
       ON CONFLICT (organization_id, user_id) DO NOTHING RETURNING user_id`,
      [organizationId, userId, role],
    );
    return rows.length > 0;
  }

  async findMember(
    manager: EntityManager,
    organizationId: string,
    userId: string,
  ): Promise<MemberRow | null> {
    const rows: MemberRow[] = await manager.query(
      `SELECT ${MEMBER_COLUMNS}
         FROM memberships m JOIN users u ON u.id = m.user_id
        WHERE m.organization_id = $1 AND m.user_id = $2`,
      [organizationId, userId],
    );
    return rows[0] ?? null;
  }

  /** Whether a user whose address normalises to `emailKey` is a member. */
  async hasMemberWithEmail(
    manager: EntityManager,
    organizationId: string,
    emailKey: string,
  ): Promise<boolean> {
    const rows: unknown[] = await manager.query(
      `SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
        WHERE m.organization_id = $1 AND lower(u.email) = $2`,
      [organizationId, emailKey],
    );
    return rows.length > 0;
  }

  /** The organization as GET /v1/organizations shows it to this member, or null. */
  async organizationView(
    manager: EntityManager,
    organizationId: string,
    userId: string,
  ): Promise<OrganizationRow | null> {
    const rows: OrganizationRow[] = await manager.query(
      `SELECT o.id, o.name, m.role, o.created_at
         FROM memberships m JOIN organizations o ON o.id = m.organization_id
        WHERE m.organization_id = $1 AND m.user_id = $2`,
      [organizationId, userId],
    );
    return rows[0] ?? null;
  }
}
