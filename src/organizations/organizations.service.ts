import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import { DataSource, EntityManager } from 'typeorm';
import { InvalidationChannel } from '../common/cache/invalidation-channel';
import { type Page, toPage } from '../common/pagination/pagination';
import { TtlCache } from '../common/cache/ttl-cache';
import { ROOT_LOGGER } from '../common/logging/root-logger';
import { poolOf } from '../database/pg-pool';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';
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

/**
 * How long a cached membership is trusted. The cache is used only while this instance is
 * subscribed to the membership channel (REDIS_URL set and reachable), and every change is
 * published before it is answered, so the TTL only bounds a message lost to a network partition
 * between this instance and Redis (docs/teams.md).
 */
export const MEMBERSHIP_CACHE_MS = 5_000;
const FIRST = '*';
const MEMBERSHIP_IN = {
  name: 'memberships_grant_in',
  text: 'SELECT organization_id, role FROM memberships WHERE user_id = $1 AND organization_id = $2',
};
const FIRST_MEMBERSHIP = {
  name: 'memberships_grant_first',
  text: 'SELECT organization_id, role FROM memberships WHERE user_id = $1 ORDER BY created_at, organization_id LIMIT 1',
};

@Injectable()
export class OrganizationsService implements OnModuleInit, OnModuleDestroy {
  private readonly memberships = new TtlCache<MembershipGrant | null>(MEMBERSHIP_CACHE_MS);
  private readonly membershipChanges: InvalidationChannel;
  private readonly pool: Pool;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(REDIS_CLIENT) redis: RedisClient,
    @Inject(ROOT_LOGGER) logger: Logger,
  ) {
    this.membershipChanges = new InvalidationChannel(redis, 'identity:membership-changed', logger);
    this.pool = poolOf(dataSource);
  }

  onModuleInit(): void {
    this.membershipChanges.listen(
      (userId) => this.memberships.deleteByPrefix(`${userId}:`),
      () => this.memberships.clear(),
    );
  }

  onModuleDestroy(): void {
    this.membershipChanges.close();
  }

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
   * null when the user is not a member. This runs on every user request: it is cached only while
   * changes reach this instance through Redis at once, else read from the database every time
   * (one primary-key lookup), so a removal or demotion holds from the next request everywhere.
   */
  async membership(userId: string, organizationId?: string): Promise<MembershipGrant | null> {
    const cacheable = this.membershipChanges.isLive();
    const key = `${userId}:${organizationId ?? FIRST}`;
    const cached = cacheable ? this.memberships.get(key) : undefined;
    if (cached !== undefined) return cached;
    // Straight to the pool as a prepared statement: without Redis this runs on every user request.
    const { rows } = await this.pool.query<{ organization_id: string; role: Role }>(
      organizationId
        ? { ...MEMBERSHIP_IN, values: [userId, organizationId] }
        : { ...FIRST_MEMBERSHIP, values: [userId] },
    );
    const grant = rows[0] ? { organizationId: rows[0].organization_id, role: rows[0].role } : null;
    if (cacheable) this.memberships.set(key, grant);
    return grant;
  }

  /**
   * After a membership of the user changed (joined, role changed, removed) and committed: forgets
   * it here and, before resolving, on every instance subscribed through Redis (each acknowledges).
   */
  forgetMemberships(userId: string): Promise<void> {
    this.memberships.deleteByPrefix(`${userId}:`);
    return this.membershipChanges.publishConfirmed(userId);
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
