import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { Database } from '../database/database';
import type { Role } from './entities/membership.entity';

export interface OrganizationRoleRow {
  id: string;
  name: string;
  role: Role;
  created_at: Date;
}

export interface GrantRow {
  organization_id: string;
  role: Role;
}

const GRANT_IN = {
  name: 'memberships_grant_in',
  text: 'SELECT organization_id, role FROM memberships WHERE user_id = $1 AND organization_id = $2',
};
const FIRST_GRANT = {
  name: 'memberships_grant_first',
  text: 'SELECT organization_id, role FROM memberships WHERE user_id = $1 ORDER BY created_at, organization_id LIMIT 1',
};

/** The SQL of organizations and of a user's own memberships in them. */
@Injectable()
export class OrganizationsRepository {
  private readonly pool: Pool;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    database: Database,
  ) {
    this.pool = database.pool;
  }

  async insert(
    manager: EntityManager,
    name: string,
  ): Promise<{ id: string; name: string; created_at: Date }> {
    const rows: Array<{ id: string; name: string; created_at: Date }> = await manager.query(
      'INSERT INTO organizations (name) VALUES ($1) RETURNING id, name, created_at',
      [name],
    );
    return rows[0];
  }

  async insertMembership(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    role: Role,
  ): Promise<void> {
    await manager.query(
      'INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, $3)',
      [organizationId, userId, role],
    );
  }

  /** The user's organizations, oldest membership first, paged by organization id. */
  findPageForUser(
    userId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<OrganizationRoleRow[]> {
    return this.dataSource.query(
      `SELECT o.id, o.name, m.role, o.created_at
         FROM memberships m JOIN organizations o ON o.id = m.organization_id
        WHERE m.user_id = $1
          AND ($2::uuid IS NULL OR (m.created_at, o.id) > (
                SELECT m2.created_at, m2.organization_id FROM memberships m2
                 WHERE m2.user_id = $1 AND m2.organization_id = $2::uuid))
        ORDER BY m.created_at, o.id
        LIMIT $3`,
      [userId, startingAfter ?? null, limit + 1],
    );
  }

  /**
   * The user's membership of `organizationId`, or of their first organization when none is named.
   * Straight to the pool as a prepared statement: without Redis this runs on every user request.
   */
  async findGrant(userId: string, organizationId?: string): Promise<GrantRow | null> {
    const { rows } = await this.pool.query<GrantRow>(
      organizationId
        ? { ...GRANT_IN, values: [userId, organizationId] }
        : { ...FIRST_GRANT, values: [userId] },
    );
    return rows[0] ?? null;
  }

  async findRateLimit(
    organizationId: string,
  ): Promise<{ rate_limit_rps: number | null; rate_limit_burst: number | null } | null> {
    const rows: Array<{ rate_limit_rps: number | null; rate_limit_burst: number | null }> =
      await this.dataSource.query(
        'SELECT rate_limit_rps, rate_limit_burst FROM organizations WHERE id = $1',
        [organizationId],
      );
    return rows[0] ?? null;
  }
}
