import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { OrganizationPatchAudit } from '../audit/audit-event.step';
import { Columns, type RowOf } from '../database/columns';
import { Database } from '../database/database';
import { cte, sql, withEntries } from '../database/sql';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import type { Membership } from './entities/membership.entity';
import type { Organization } from './entities/organization.entity';
import { makerOf } from './organization-maker';
import { managerMembership } from '../users/manager-membership';

/** What a member sees of an organization (GET /v1/organizations). */
const VIEWED = ['id', 'name', 'memoryRetentionDays', 'createdAt'] as const;

const ORGANIZATION = Columns.rowOf<Organization>()(...VIEWED);

/** An organization `o` as one of its members (`m`) sees it: with their role. */
export const ORGANIZATION_WITH_ROLE = Columns.rowOf<Organization>('o')(...VIEWED).and(
  Columns.rowOf<Membership>('m')('role'),
);

export type OrganizationRoleRow = RowOf<typeof ORGANIZATION_WITH_ROLE>;

const GRANT = Columns.rowOf<Membership>()('organizationId', 'role');

export type GrantRow = RowOf<typeof GRANT>;

const RATE_LIMIT = Columns.rowOf<Organization>()('rateLimitRps', 'rateLimitBurst');

const MAKER = Columns.computed<{ maker: string | null }>({ maker: makerOf('o') });

/** The SQL of organizations and of a user's own memberships in them. */
@Injectable()
export class OrganizationsRepository {
  constructor(private readonly database: Database) {}

  async insert(
    manager: EntityManager,
    name: string,
    createdByUserId: string,
  ): Promise<RowOf<typeof ORGANIZATION>> {
    const row = await this.database.row(
      ORGANIZATION.query`INSERT INTO organizations (name, created_by_user_id)
          VALUES (${name}, ${createdByUserId})
          RETURNING ${ORGANIZATION}`,
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
    return this.database.rows(
      ORGANIZATION_WITH_ROLE.query`SELECT ${ORGANIZATION_WITH_ROLE}
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
      ? await this.database.row(
          GRANT.query`SELECT ${GRANT} FROM memberships
               WHERE user_id = ${userId} AND organization_id = ${organizationId}`,
          { prepared: true },
        )
      : await this.database.row(
          GRANT.query`SELECT ${GRANT} FROM memberships
               WHERE user_id = ${userId} ORDER BY created_at, organization_id LIMIT 1`,
          { prepared: true },
        );
    return row ?? null;
  }

  /**
   * The organization as the user sees it after the change; undefined, and nothing changed, unless
   * they are its owner or admin, with the access token they asked with, when the row is written
   * (managerMembership, under its locks: a role change or a password reset in flight is waited
   * for and its outcome read, and one that comes later waits for this write).
   */
  updateMemoryRetention(
    organizationId: string,
    { userId, tokenVersion }: { userId: string; tokenVersion?: number },
    days: number | null,
    at: Date,
    audit: OrganizationPatchAudit,
  ): Promise<OrganizationRoleRow | undefined> {
    const changed = cte(
      'changed',
      { organization_id: sql`id` },
      (lent) => sql`
        UPDATE organizations SET memory_retention_days = ${days}, updated_at = ${at}
         WHERE id = ${organizationId}
           AND EXISTS (${managerMembership(organizationId, userId, tokenVersion)})
        RETURNING ${ORGANIZATION}, ${lent}`,
    );
    return this.database.row(
      withEntries(
        [changed, ...audit(changed)],
        ORGANIZATION_WITH_ROLE.query`SELECT ${ORGANIZATION_WITH_ROLE}
            FROM ${changed.ref} o
            JOIN memberships m ON m.organization_id = o.id AND m.user_id = ${userId}`,
      ),
    );
  }

  /**
   * The user who made the organization; for one without (its maker gone, or written by the
   * previous release during a rolling deploy), its earliest member, as migration
   * OrganizationsNameTheirCreator gave the organizations made before it. Null when there is
   * neither (or no such organization).
   */
  async findMaker(organizationId: string): Promise<string | null> {
    const row = await this.database.row(
      MAKER.query`SELECT ${MAKER} FROM organizations o WHERE o.id = ${organizationId}`,
    );
    return row?.maker ?? null;
  }

  async findRateLimit(organizationId: string): Promise<RowOf<typeof RATE_LIMIT> | null> {
    const row = await this.database.row(
      RATE_LIMIT.query`SELECT ${RATE_LIMIT} FROM organizations WHERE id = ${organizationId}`,
    );
    return row ?? null;
  }
}
