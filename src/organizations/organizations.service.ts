import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { type Page, toPage } from '../common/pagination/pagination';
import { TtlCache } from '../common/cache/ttl-cache';
import type { Role } from './entities/membership.entity';

export interface OrganizationView {
  id: string;
  name: string;
  role: Role;
  created_at: string;
}

export interface MembershipGrant {
  organizationId: string;
  role: Role;
}

export interface RateLimitOverride {
  rps: number | null;
  burst: number | null;
}

/** How long a removed membership may still be honoured by another instance. */
export const MEMBERSHIP_CACHE_MS = 5_000;
const FIRST = '*';

@Injectable()
export class OrganizationsService {
  private readonly memberships = new TtlCache<MembershipGrant | null>(MEMBERSHIP_CACHE_MS);

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Creates an organization with `userId` as its owner, inside the caller's transaction. */
  async createWithOwner(
    manager: EntityManager,
    userId: string,
    name: string,
  ): Promise<OrganizationView> {
    const [organization]: Array<{ id: string; name: string; created_at: Date }> =
      await manager.query(
        'INSERT INTO organizations (name) VALUES ($1) RETURNING id, name, created_at',
        [name],
      );
    await manager.query(
      `INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, 'owner')`,
      [organization.id, userId],
    );
    this.memberships.delete(`${userId}:${FIRST}`);
    return {
      id: organization.id,
      name: organization.name,
      role: 'owner',
      created_at: organization.created_at.toISOString(),
    };
  }

  create(userId: string, name: string): Promise<OrganizationView> {
    return this.dataSource.transaction((manager) => this.createWithOwner(manager, userId, name));
  }

  /** The user's organizations, oldest membership first, paged by organization id. */
  async listForUser(
    userId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<OrganizationView>> {
    const rows: Array<{ id: string; name: string; role: Role; created_at: Date }> =
      await this.dataSource.query(
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
    return toPage(rows, limit, (row) => ({
      id: row.id,
      name: row.name,
      role: row.role,
      created_at: row.created_at.toISOString(),
    }));
  }

  /**
   * The user's role in `organizationId`, or in their first organization when none is named;
   * null when the user is not a member. Cached briefly: this runs on every user request.
   */
  async membership(userId: string, organizationId?: string): Promise<MembershipGrant | null> {
    const key = `${userId}:${organizationId ?? FIRST}`;
    const cached = this.memberships.get(key);
    if (cached !== undefined) return cached;
    const rows: Array<{ organization_id: string; role: Role }> = organizationId
      ? await this.dataSource.query(
          'SELECT organization_id, role FROM memberships WHERE user_id = $1 AND organization_id = $2',
          [userId, organizationId],
        )
      : await this.dataSource.query(
          'SELECT organization_id, role FROM memberships WHERE user_id = $1 ORDER BY created_at, organization_id LIMIT 1',
          [userId],
        );
    const grant = rows[0] ? { organizationId: rows[0].organization_id, role: rows[0].role } : null;
    this.memberships.set(key, grant);
    return grant;
  }

  /** The organization's own bucket size where a plan sets one (null fields: the defaults). */
  async rateLimitOverride(organizationId: string): Promise<RateLimitOverride> {
    const rows: Array<{ rate_limit_rps: number | null; rate_limit_burst: number | null }> =
      await this.dataSource.query(
        'SELECT rate_limit_rps, rate_limit_burst FROM organizations WHERE id = $1',
        [organizationId],
      );
    return { rps: rows[0]?.rate_limit_rps ?? null, burst: rows[0]?.rate_limit_burst ?? null };
  }
}
