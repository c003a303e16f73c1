import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import type { Row } from '../database/row';
import { sql } from '../database/sql';
import type { Membership } from './entities/membership.entity';
import type { Organization } from './entities/organization.entity';

/** An organization as one of its members sees it: with their role. */
export type OrganizationRoleRow = Row<
  Organization,
  'id' | 'name' | 'memoryRetentionDays' | 'createdAt'
> &
  Row<Membership, 'role'>;

export type GrantRow = Row<Membership, 'organizationId' | 'role'>;

/** The SQL of organizations and of a user's own memberships in them. */
@Injectable()
export class OrganizationsRepository {
  constructor(private readonly database: Database) {}

  async insert(
    manager: EntityManager,
    name: string,
  ): Promise<Row<Organization, 'id' | 'name' | 'memoryRetentionDays' | 'createdAt'>> {
    const row = await this.database.row<
      Row<Organization, 'id' | 'name' | 'memoryRetentionDays' | 'createdAt'>
    >(
      sql`INSERT INTO organizations (name) VALUES (${name})
          RETURNING id, name, memory_retention_days, created_at`,
      { manager },
    );
    return row!;
  }

  /** The user's organizations, oldest membership first, paged by organization id. */
  findPageForUser(
    userId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<OrganizationRoleRow[]> {
    const page: Keyset = {
      table: 'memberships',
      alias: 'm',
      id: 'organization_id',
      cursor: startingAfter,
      scope: { user_id: userId },
      order: 'asc',
    };
    return this.database.rows<OrganizationRoleRow>(
      sql`SELECT o.id, o.name, m.role, o.memory_retention_days, o.created_at
            FROM memberships m JOIN organizations o ON o.id = m.organization_id
           WHERE m.user_id = ${userId} AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  /**
   * The user's membership of `organizationId`, or of their first organization when none is named.
   * A prepared statement on the pool: without Redis this runs on every user request.
   */
  async findGrant(userId: string, organizationId?: string): Promise<GrantRow | null> {
    const row = organizationId
      ? await this.database.row<GrantRow>(
          sql`SELECT organization_id, role FROM memberships
               WHERE user_id = ${userId} AND organization_id = ${organizationId}`,
          { prepared: true },
        )
      : await this.database.row<GrantRow>(
          sql`SELECT organization_id, role FROM memberships
               WHERE user_id = ${userId} ORDER BY created_at, organization_id LIMIT 1`,
          { prepared: true },
        );
    return row ?? null;
  }

  /** The organization as `userId` sees it after the change; undefined when not a member. */
  updateMemoryRetention(
    organizationId: string,
    userId: string,
    days: number | null,
    at: Date,
  ): Promise<OrganizationRoleRow | undefined> {
    return this.database.row<OrganizationRoleRow>(
      sql`WITH changed AS (
            UPDATE organizations SET memory_retention_days = ${days}, updated_at = ${at}
             WHERE id = ${organizationId}
            RETURNING id, name, memory_retention_days, created_at)
          SELECT c.id, c.name, m.role, c.memory_retention_days, c.created_at
            FROM changed c JOIN memberships m ON m.organization_id = c.id AND m.user_id = ${userId}`,
    );
  }

  async findRateLimit(
    organizationId: string,
  ): Promise<Row<Organization, 'rateLimitRps' | 'rateLimitBurst'> | null> {
    const row = await this.database.row<Row<Organization, 'rateLimitRps' | 'rateLimitBurst'>>(
      sql`SELECT rate_limit_rps, rate_limit_burst FROM organizations WHERE id = ${organizationId}`,
    );
    return row ?? null;
  }
}
