import { Inject, Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import type { EntityManager } from 'typeorm';
import { InvalidationChannel } from '../common/cache/invalidation-channel';
import { Caches } from '../common/cache/caches';
import type { TtlCache } from '../common/cache/ttl-cache';
import { organizationPatchAudit } from '../audit/audit-event.step';
import { AuditService } from '../audit/audit.service';
import type { ActingUserCaller } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { type Page, toPage } from '../common/pagination/pagination';
import { Clock } from '../common/time/clock';
import { teamsConfig } from '../config/teams.config';
import { tokenNoLongerValid } from '../users/token-version-held';
import { UsersService } from '../users/users.service';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';
import { Database } from '../database/database';
import type { Role } from './entities/membership.entity';
import { MembersRepository } from './members.repository';
import { type OrganizationRoleRow, OrganizationsRepository } from './organizations.repository';
import { organizationNotFound } from './team-rules';

export interface OrganizationView {
  id: string;
  name: string;
  role: Role;
  memory_retention_days: number | null;
  created_at: string;
}

export function toOrganizationView(row: OrganizationRoleRow): OrganizationView {
  return {
    id: row.id,
    name: row.name,
    role: row.role,
    memory_retention_days: row.memory_retention_days,
    created_at: row.created_at.toISOString(),
  };
}

/** Who creates an organization, and the request they do it from (its audit event's origin). */
export interface OrganizationCreator {
  userId: string;
  requestId?: string;
  ip?: string;
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

/**
 * How long an organization's account is kept: a fairness key, read on every tool call. Its maker
 * never changes but for a deletion of the user (ON DELETE SET NULL), and an organization without
 * one is its earliest member's account: either may be answered stale for this long, which moves
 * no more than one organization's share between accounts.
 */
const ACCOUNT_CACHE_MS = 10 * 60_000;

/** 404 unless the caller is a member, 403 unless an owner or admin. */
function assertManages(grant: MembershipGrant | null): void {
  if (!grant) throw organizationNotFound();
  if (grant.role === 'member') {
    throw new AppError(
      'insufficient_scope',
      'Changing the organization needs the owner or admin role',
    );
  }
}

@Injectable()
export class OrganizationsService implements OnModuleInit, OnApplicationShutdown {
  private readonly memberships: TtlCache<MembershipGrant | null>;
  private readonly membershipChanges: InvalidationChannel;
  private readonly accounts: TtlCache<string>;

  constructor(
    private readonly database: Database,
    private readonly organizations: OrganizationsRepository,
    private readonly members: MembersRepository,
    @Inject(REDIS_CLIENT) redis: RedisClient,
    logger: PinoLogger,
    private readonly clock: Clock,
    private readonly users: UsersService,
    @Inject(teamsConfig.KEY) private readonly teams: ConfigType<typeof teamsConfig>,
    caches: Caches,
    private readonly audit: AuditService,
  ) {
    logger.setContext(OrganizationsService.name);
    this.memberships = caches.local(MEMBERSHIP_CACHE_MS);
    this.accounts = caches.local(ACCOUNT_CACHE_MS);
    this.membershipChanges = new InvalidationChannel(redis, 'identity:membership-changed', logger);
  }

  onModuleInit(): void {
    this.membershipChanges.listen(
      (userId) => this.memberships.deleteByPrefix(`${userId}:`),
      () => this.memberships.clear(),
    );
  }

  /** Once the HTTP server has closed: a request still served hears every invalidation. */
  onApplicationShutdown(): void {
    this.membershipChanges.close();
  }

  /**
   * Creates an organization with `creator` as its owner, inside the caller's transaction
   * (sign-up's or its own), counted against the user's ORGANIZATIONS_PER_USER: 409
   * `organization_limit` past it. The count is one atomic UPDATE of the user's row, so concurrent
   * creations cannot pass the cap together. Its audit log begins with `organization.created`, by
   * the creator, from the request that made it.
   */
  async createWithOwner(
    manager: EntityManager,
    creator: OrganizationCreator,
    name: string,
  ): Promise<OrganizationView> {
    const { userId } = creator;
    const cap = this.teams.organizationsPerUser;
    if (!(await this.users.countOrganizationCreated(manager, userId, cap))) {
      throw new AppError(
        'organization_limit',
        `A user creates at most ${cap} organizations, the one made at sign-up included`,
      );
    }
    const organization = await this.organizations.insert(manager, name, userId);
    await this.members.insertIfAbsent(manager, organization.id, userId, 'owner');
    await this.audit.record(
      manager,
      {
        kind: 'user',
        userId,
        organizationId: organization.id,
        scopes: ['admin'],
        requestId: creator.requestId,
        ip: creator.ip,
      },
      {
        organizationId: organization.id,
        action: 'organization.created',
        target: { type: 'organization', id: organization.id },
        details: { name },
      },
    );
    this.memberships.delete(`${userId}:${FIRST}`);
    return toOrganizationView({ ...organization, role: 'owner' });
  }

  /**
   * POST /v1/organizations: as createWithOwner, once the creator's access token is known to
   * still hold (an ended token made organizations on an instance whose cached version was
   * seconds old; found by review).
   */
  async create(
    creator: OrganizationCreator & { tokenVersion?: number },
    name: string,
  ): Promise<OrganizationView> {
    const { userId } = creator;
    const created = await this.database.transaction(async (manager) => {
      await this.members.assertActorTokenHolds(manager, creator);
      return this.createWithOwner(manager, creator, name);
    });
    // Once committed, everywhere: a user who belonged to no organization has one now, and a
    // copy of "none" kept here meanwhile or on another instance would refuse them for seconds.
    await this.forgetMemberships(userId);
    return created;
  }

  /** The user's organizations, oldest membership first, paged by organization id. */
  async listForUser(
    userId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<OrganizationView>> {
    const rows = await this.organizations.findPageForUser(userId, limit, startingAfter);
    return toPage(rows, limit, toOrganizationView);
  }

  /** Owners and admins set how long the organization's memories are kept (docs/memory.md). */
  async setMemoryRetention(
    caller: ActingUserCaller,
    organizationId: string,
    days: number | null,
  ): Promise<OrganizationView> {
    assertManages(await this.membership(caller.userId, organizationId));
    const write = () => {
      const at = this.clock.now();
      return this.organizations.updateMemoryRetention(
        organizationId,
        caller,
        days,
        at,
        organizationPatchAudit(
          caller,
          { organizationId, action: 'organization.updated', at },
          { memory_retention_days: days },
        ),
      );
    };
    const row = await write();
    if (row) return toOrganizationView(row);
    // The write checks the role and the token itself and found one gone: the token ended by a
    // password reset since it was let in (401), or the role demoted or removed, asked again past
    // the cache (this instance may not have been told yet): a 403 if so, and one more write if
    // the role came back in between.
    if (await this.users.tokenEnded(caller)) throw tokenNoLongerValid();
    assertManages(await this.grantFromDatabase(caller.userId, organizationId));
    const again = await write();
    if (again) return toOrganizationView(again);
    if (await this.users.tokenEnded(caller)) throw tokenNoLongerValid();
    throw organizationNotFound();
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
    // A read that a change overtook is answered, not kept (TtlCache.setUnlessDropped).
    const mark = this.memberships.dropMark();
    const grant = await this.grantFromDatabase(userId, organizationId);
    if (cacheable) this.memberships.setUnlessDropped(mark, key, grant);
    return grant;
  }

  private async grantFromDatabase(
    userId: string,
    organizationId?: string,
  ): Promise<MembershipGrant | null> {
    const row = await this.organizations.findGrant(userId, organizationId);
    return row ? { organizationId: row.organization_id, role: row.role } : null;
  }

  /**
   * Whose organization this is, for what instances share between tenants (HTML conversions,
   * heavy document writes, import slots): the id of the user who made it. One user may make
   * ORGANIZATIONS_PER_USER organizations, so a share per organization gave one user ten (found by
   * review); their organizations share one. Not its owners: an owner could promote a member they
   * invited and step down, and the member's own organizations then shared the owner's uploads
   * (found by review). Nor do they change when the maker leaves: an organization handed over
   * stays in its maker's account (docs/knowledge.md). The organization's own id when it has
   * neither maker nor member.
   */
  async accountOf(organizationId: string): Promise<string> {
    const cached = this.accounts.get(organizationId);
    if (cached !== undefined) return cached;
    const account = (await this.organizations.findMaker(organizationId)) ?? organizationId;
    this.accounts.set(organizationId, account);
    return account;
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
    const row = await this.organizations.findRateLimit(organizationId);
    return { rps: row?.rate_limit_rps ?? null, burst: row?.rate_limit_burst ?? null };
  }
}
