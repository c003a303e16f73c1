import { randomUUID } from 'node:crypto';
import { Inject, Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import type { EntityManager } from 'typeorm';
import { auditEventStep, auditOrigin } from '../audit/audit-event.step';
import { AuditService } from '../audit/audit.service';
import { InvalidationChannel } from '../common/cache/invalidation-channel';
import { Caches } from '../common/cache/caches';
import type { TtlCache } from '../common/cache/ttl-cache';
import {
  type AuthenticatedCaller,
  type CallerContext,
  type KeyBucket,
  type Scope,
  scopeSatisfies,
  type UserCaller,
} from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import {
  type AfterReset,
  type PasswordReset,
  TakesAccountBack,
} from '../common/password-reset/password-reset-participant';
import { Clock } from '../common/time/clock';
import { secondsToNextUtcDay, utcDay } from '../common/time/utc-day';
import { teamsConfig } from '../config/teams.config';
import { Database } from '../database/database';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';
import { stillManages } from '../users/manager-membership';
import { tokenNoLongerValid } from '../users/token-version-held';
import { UsersService } from '../users/users.service';
import {
  DISPLAY_PREFIX_LENGTH,
  generateApiKey,
  hashApiKey,
  isWellFormedApiKey,
} from './api-key-format';
import { ApiKeysRepository, type ApiKeyRow, type NewApiKey } from './api-keys.repository';
import {
  ApiKeyDto,
  CreateApiKeyDto,
  CreatedApiKeyDto,
  toApiKeyResponse,
  UpdateApiKeyDto,
} from './dto/api-key.dto';
import type { ApiKey } from './entities/api-key.entity';

/**
 * How long another instance may keep honouring a revoked key when Redis is not there to tell it.
 * The revoking instance forgets the key at once; with REDIS_URL the revocation is broadcast and
 * every instance forgets it at once too (docs/identity.md).
 */
export const API_KEY_CACHE_MS = 5_000;
/**
 * How long an unknown key is remembered as unknown: a flood of one forged key costs one lookup a
 * minute (contract §14). Keys are 256 random bits, so an unknown one never becomes valid.
 */
const UNKNOWN_KEY_CACHE_MS = 60_000;
/** `last_used_at` is written at most this often per key, not on every request. */
const LAST_USED_WRITE_INTERVAL_MS = 60_000;

/** Keys revoked in a transaction, to announce once it has committed. */
export interface RevokedKeys {
  hashes: string[];
}

/** Why keys were revoked with a change of their maker's standing (`api_key.revoked` details). */
type RevocationReason = 'member_removed' | 'member_demoted' | 'password_reset';

interface CachedKey {
  id: string;
  organizationId: string;
  scopes: Scope[];
  expiresAt: number | null;
  rateLimit: KeyBucket | null;
}

type BucketSize = { rps: number; burst: number };

/** A user whose owner or admin role went (demoted or removed) while their request ran. */
const roleGone = () =>
  new AppError('insufficient_scope', 'Managing API keys needs the owner or admin role');

const bucketOf = (
  row: Pick<ApiKey, 'rateLimitRps' | 'rateLimitBurst' | 'rateLimitBucketId'>,
): KeyBucket | null =>
  row.rateLimitRps === null || row.rateLimitBurst === null
    ? null
    : { bucketId: row.rateLimitBucketId, rps: row.rateLimitRps, burst: row.rateLimitBurst };

/**
 * A new key: the secret (shown once) and the row to store, which holds only its hash. Its own
 * bucket is a fresh one unless `bucketId` names the bucket of the key it replaces (a roll).
 */
function newKey(
  caller: CallerContext,
  name: string,
  scopes: Scope[],
  expiresAt: Date | null,
  rateLimit: BucketSize | null,
  bucketId: string = randomUUID(),
): { key: string; row: NewApiKey } {
  const key = generateApiKey();
  return {
    key,
    row: {
      organizationId: caller.organizationId,
      name,
      scopes,
      prefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
      lastFour: key.slice(-4),
      keyHash: hashApiKey(key),
      createdByUserId: caller.kind === 'user' ? caller.userId : null,
      creatorTokenVersion: caller.kind === 'user' ? caller.tokenVersion : undefined,
      createdByApiKeyId: caller.kind === 'api_key' ? caller.apiKeyId : null,
      expiresAt,
      rateLimitRps: rateLimit?.rps ?? null,
      rateLimitBurst: rateLimit?.burst ?? null,
      rateLimitBucketId: bucketId,
    },
  };
}

@Injectable()
export class ApiKeysService implements OnModuleInit, OnApplicationShutdown {
  private readonly byHash: TtlCache<CachedKey>;
  /** Hashes found to be no key: apart, so a flood of forged keys cannot evict the real ones. */
  private readonly unknownHashes: TtlCache<true>;
  /** Keys whose last_used_at was written within the interval (bounded, expiring entries). */
  private readonly lastUsedWrites: TtlCache<true>;
  private readonly revocations: InvalidationChannel;

  constructor(
    private readonly keys: ApiKeysRepository,
    private readonly database: Database,
    @Inject(REDIS_CLIENT) redis: RedisClient,
    private readonly logger: PinoLogger,
    private readonly audit: AuditService,
    private readonly clock: Clock,
    private readonly users: UsersService,
    @Inject(teamsConfig.KEY) private readonly teams: ConfigType<typeof teamsConfig>,
    caches: Caches,
  ) {
    this.logger.setContext(ApiKeysService.name);
    this.byHash = caches.local(API_KEY_CACHE_MS);
    this.unknownHashes = caches.local(UNKNOWN_KEY_CACHE_MS);
    this.lastUsedWrites = caches.local(LAST_USED_WRITE_INTERVAL_MS);
    this.revocations = new InvalidationChannel(redis, 'identity:api-key-revoked', logger);
  }

  onModuleInit(): void {
    this.revocations.listen(
      (hashHex) => this.byHash.delete(hashHex),
      // A gap in the subscription may have lost revocations: every key is looked up again.
      () => this.byHash.clear(),
    );
  }

  /** Once the HTTP server has closed: a request still served hears every invalidation. */
  onApplicationShutdown(): void {
    this.revocations.close();
  }

  async create(caller: CallerContext, dto: CreateApiKeyDto): Promise<CreatedApiKeyDto> {
    const excess = dto.scopes.filter((scope) => !scopeSatisfies(caller.scopes, scope));
    if (excess.length > 0) {
      throw new AppError(
        'insufficient_scope',
        `You cannot grant scopes you do not hold: ${excess.join(', ')}`,
      );
    }
    const expiresAt = dto.expires_at ? new Date(dto.expires_at) : null;
    if (expiresAt && expiresAt.getTime() <= this.clock.nowMs()) {
      throw AppError.validation([{ field: 'expires_at', problem: 'must be in the future' }]);
    }
    const { key, row } = newKey(caller, dto.name, dto.scopes, expiresAt, dto.rate_limit ?? null);
    const now = this.clock.now();
    const created = await this.database.transaction(async (manager) => {
      await this.countMade(manager, caller, now);
      const made = await this.keys.insertAudited(
        manager,
        row,
        auditEventStep(
          auditOrigin(caller, {
            organizationId: caller.organizationId,
            action: 'api_key.created',
            targetType: 'api_key',
            at: now,
          }),
        ),
        now,
      );
      // Made by a key revoked (or expired) meanwhile: by a member's removal or demotion that
      // locked it first, say. The key no longer authenticates anything, this request included.
      // Made by a user removed or demoted meanwhile: their role no longer allows it; or whose
      // password was reset meanwhile: their access token is ended. Nothing made, nothing counted.
      if (!made)
        throw caller.kind === 'user' ? await this.userRefusal(caller) : AppError.unauthenticated();
      return made;
    });
    return this.issued(key, row, created);
  }

  /**
   * Issues a new key with the old one's name and scopes; the old one keeps working until now +
   * `expiresInSeconds` (0: it is revoked at once), or its own earlier expiry.
   */
  async roll(
    caller: CallerContext,
    id: string,
    expiresInSeconds: number,
  ): Promise<CreatedApiKeyDto> {
    const now = this.clock.now();
    const { created, oldHash } = await this.database.transaction(async (manager) => {
      await this.countMade(manager, caller, now);
      // A user's role first (memberships are locked before keys): still an owner or admin.
      if (
        caller.kind === 'user' &&
        !(await this.keys.lockManagerMembership(
          manager,
          caller.organizationId,
          caller.userId,
          caller.tokenVersion,
        ))
      ) {
        throw await this.userRefusal(caller);
      }
      // The rolled key, and the caller's key that makes the new one (ApiKeysRepository's
      // RANK_ORDER: a member's removal or demotion revokes what that key makes).
      const {
        rolled: old,
        callerLive,
        callerExpiresAt,
      } = await this.keys.lockForRoll(
        manager,
        id,
        caller.organizationId,
        caller.kind === 'api_key' ? caller.apiKeyId : null,
        now,
      );
      if (!callerLive) throw AppError.unauthenticated();
      if (!old) throw AppError.notFound('API key');
      const oldEndsAt =
        expiresInSeconds === 0
          ? (await this.keys.revokeAt(manager, id, caller.organizationId, now), now)
          : await this.keys.expireBy(
              manager,
              id,
              caller.organizationId,
              new Date(now.getTime() + expiresInSeconds * 1000),
            );
      // The new key keeps the old one's own bucket: its size and its tokens (contract §29), so
      // a roll refills nothing, and the two keys share the bucket while both work. It has no
      // expiry of its own, but, made by a key, ends no later than that key did before this roll
      // (a key rolling itself is a rotation; another key's roll gives no way past its end).
      const { key, row } = newKey(
        caller,
        old.name,
        old.scopes,
        callerExpiresAt,
        bucketOf(old),
        old.rateLimitBucketId,
      );
      const issued = this.issued(key, row, await this.keys.insert(manager, row, now));
      await this.audit.record(manager, caller, {
        organizationId: caller.organizationId,
        action: 'api_key.rolled',
        target: { type: 'api_key', id },
        details: {
          new_key_id: issued.id,
          old_key_expires_at: oldEndsAt.toISOString(),
        },
      });
      return { created: issued, oldHash: old.keyHash.toString('hex') };
    });
    // Every instance re-reads the old key (each confirms), so its new expiry holds everywhere
    // from the answer on.
    this.byHash.delete(oldHash);
    await this.revocations.publishConfirmed(oldHash);
    return created;
  }

  /**
   * Counts a key made today in the caller's member's lines (API_KEYS_PER_DAY), first in the
   * transaction that makes it: 429 `rate_limited` past it, with Retry-After the seconds to the
   * next UTC midnight. Removing or demoting a member, and a reset taking an address back, revoke
   * every key down the member's lines in one statement, whose time grows with how many keys
   * those hold: an admin who made 250,000 could be neither removed nor demoted, every attempt
   * past the statement timeout (found by review). Per member, and by access token apart from by
   * key: a leaked admin key spending the day's keys leaves its owner, and every other member,
   * their own to roll it with (found by the review of the cap's first version, per
   * organization).
   */
  private async countMade(manager: EntityManager, caller: CallerContext, now: Date) {
    const max = this.teams.apiKeysPerDay;
    const maker = caller.kind === 'user' ? { userId: caller.userId } : { keyId: caller.apiKeyId };
    if (await this.keys.countMade(manager, caller.organizationId, maker, utcDay(now), max)) return;
    const seconds = secondsToNextUtcDay(now.getTime());
    const by = caller.kind === 'user' ? 'a member makes' : "a member's keys make";
    throw new AppError(
      'rate_limited',
      `In one organization ${by} at most ${max} API keys per UTC day, created or rolled (API_KEYS_PER_DAY); retry in ${seconds} s`,
      { headers: { 'Retry-After': String(seconds) } },
    );
  }

  /** The response for a key just stored, which is also cached: its first use needs no lookup. */
  private issued(key: string, row: NewApiKey, stored: ApiKeyRow): CreatedApiKeyDto {
    // Its first use here needs no lookup (nor the IP token that pays for one).
    this.byHash.set(row.keyHash.toString('hex'), {
      id: stored.id,
      organizationId: row.organizationId,
      scopes: row.scopes,
      // As stored: a key made by a key ends no later than its maker, whatever was asked.
      expiresAt: stored.expiresAt?.getTime() ?? null,
      rateLimit: bucketOf(row),
    });
    return { ...toApiKeyResponse(stored), key };
  }

  async list(
    organizationId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<ApiKeyDto>> {
    const rows = await this.keys.findPageForOrganization(organizationId, limit, startingAfter);
    return toPage(rows, limit, toApiKeyResponse);
  }

  /**
   * Renames the key or sets its own bucket (null: none); every instance re-reads it on its next
   * use (through Redis, each confirming before the answer; else within API_KEY_CACHE_MS).
   */
  async update(caller: CallerContext, id: string, dto: UpdateApiKeyDto): Promise<ApiKeyDto> {
    const now = this.clock.now();
    const updated = await this.keys.setRateLimit(
      id,
      caller.organizationId,
      { name: dto.name, rateLimit: dto.rate_limit },
      // A PATCH naming nothing changes nothing, and is not audited.
      dto.name === undefined && dto.rate_limit === undefined
        ? null
        : auditEventStep(
            auditOrigin(caller, {
              organizationId: caller.organizationId,
              action: 'api_key.updated',
              targetType: 'api_key',
              at: now,
            }),
          ),
      stillManages(caller, caller.organizationId),
    );
    if (!updated) throw await this.notChanged(caller);
    const hashHex = updated.keyHash.toString('hex');
    this.byHash.delete(hashHex);
    await this.revocations.publishConfirmed(hashHex);
    return toApiKeyResponse(updated);
  }

  /**
   * Revokes the key; refused on every instance from the next request on: the answer waits until
   * every instance subscribed through Redis has forgotten it (contract §8: refused at once).
   */
  async revoke(caller: CallerContext, id: string): Promise<void> {
    // The revocation and its audit event in one statement (one transaction, one round trip).
    const now = this.clock.now();
    const keyHash = await this.keys.revokeAudited(
      id,
      caller.organizationId,
      now,
      auditEventStep(
        auditOrigin(caller, {
          organizationId: caller.organizationId,
          action: 'api_key.revoked',
          targetType: 'api_key',
          at: now,
        }),
      ),
      stillManages(caller, caller.organizationId),
    );
    if (!keyHash) throw await this.notChanged(caller);
    const hashHex = keyHash.toString('hex');
    this.byHash.delete(hashHex);
    await this.revocations.publishConfirmed(hashHex);
  }

  /**
   * Why a key was not renamed or revoked: it is not the organization's (or is revoked), or the
   * user's role or token went while the request ran (stillManages).
   */
  private async notChanged(caller: CallerContext): Promise<AppError> {
    if (caller.kind === 'user' && !(await this.keys.stillManages(caller))) {
      return this.userRefusal(caller);
    }
    return AppError.notFound('API key');
  }

  /** Why a user's key was not made: their token ended by a password reset, or their role. */
  private async userRefusal(caller: UserCaller): Promise<AppError> {
    return (await this.users.tokenEnded(caller)) ? tokenNoLongerValid() : roleGone();
  }

  /**
   * In the transaction that removes a member (`reason: "member_removed"`) or demotes an owner or
   * admin to member (`adminOnly`, `reason: "member_demoted"`): revokes the organization's keys
   * `userId` made, and the keys those made, down the line, each with its `api_key.revoked`
   * audit event (actor: `caller`; details: name and reason) and webhook event. Answers what
   * `announceRevoked` needs once the transaction has committed.
   */
  async revokeMadeBy(
    manager: EntityManager,
    caller: AuthenticatedCaller,
    organizationId: string,
    userId: string,
    options: { adminOnly: boolean; reason: RevocationReason },
  ): Promise<RevokedKeys> {
    const now = this.clock.now();
    const hashes = await this.keys.revokeMadeBy(
      manager,
      organizationId,
      userId,
      options,
      now,
      auditEventStep(
        auditOrigin(caller, {
          organizationId,
          action: 'api_key.revoked',
          targetType: 'api_key',
          at: now,
        }),
      ),
    );
    return { hashes: hashes.map((hash) => hash.toString('hex')) };
  }

  /**
   * In the transaction of a password reset that took back an address never verified before:
   * revokes the keys the user made in every organization they still belong to, and the keys
   * those made, as `revokeMadeBy` does (actor: the user; `reason: "password_reset"`). Whoever
   * registered the address first made them; the mailbox's owner never did. Announced once the
   * reset has committed.
   */
  @TakesAccountBack()
  async revokeAtReset(
    manager: EntityManager,
    { userId, wasVerified }: PasswordReset,
  ): Promise<AfterReset | undefined> {
    if (wasVerified) return undefined;
    const revoked = await this.revokeEveryMadeBy(manager, userId);
    return () => this.announceRevoked(revoked);
  }

  private async revokeEveryMadeBy(manager: EntityManager, userId: string): Promise<RevokedKeys> {
    const hashes: string[] = [];
    for (const organizationId of await this.keys.organizationsWithKeysMadeBy(manager, userId)) {
      const caller: UserCaller = { kind: 'user', userId, organizationId, scopes: ['admin'] };
      const revoked = await this.revokeMadeBy(manager, caller, organizationId, userId, {
        adminOnly: false,
        reason: 'password_reset',
      });
      hashes.push(...revoked.hashes);
    }
    return { hashes };
  }

  /**
   * After the revocation committed: refused at once here and, before this resolves, on every
   * instance subscribed through Redis (identity:api-key-revoked, each acknowledging, as
   * membership changes are), so the removal's answer finds no instance still honouring a key.
   */
  async announceRevoked(revoked: RevokedKeys): Promise<void> {
    for (const hashHex of revoked.hashes) this.byHash.delete(hashHex);
    await Promise.all(revoked.hashes.map((hashHex) => this.revocations.publishConfirmed(hashHex)));
  }

  /** True when authenticating this key would query the database (well-formed, not cached). */
  needsLookup(key: string): boolean {
    if (!isWellFormedApiKey(key)) return false;
    const cacheKey = hashApiKey(key).toString('hex');
    return !this.byHash.has(cacheKey) && !this.unknownHashes.has(cacheKey);
  }

  /** The caller an API key stands for, or null for a malformed, unknown, revoked or expired key. */
  async authenticate(key: string): Promise<CallerContext | null> {
    if (!isWellFormedApiKey(key)) return null;
    const hash = hashApiKey(key);
    const cacheKey = hash.toString('hex');
    if (this.unknownHashes.has(cacheKey)) return null;
    let found = this.byHash.get(cacheKey);
    if (found === undefined) {
      // A lookup that a revocation overtook is answered, not kept (TtlCache.setUnlessDropped).
      const mark = this.byHash.dropMark();
      const row = await this.keys.findUnrevokedByHash(hash);
      if (!row) {
        this.unknownHashes.set(cacheKey, true);
        return null;
      }
      found = {
        id: row.id,
        organizationId: row.organizationId,
        scopes: row.scopes,
        expiresAt: row.expiresAt?.getTime() ?? null,
        rateLimit: bucketOf(row),
      };
      this.byHash.setUnlessDropped(mark, cacheKey, found);
    }
    // The injected clock (a property read and a call), so a spec can move past an expiry.
    if (found.expiresAt !== null && found.expiresAt <= this.clock.nowMs()) return null;
    this.recordUse(found.id);
    return {
      kind: 'api_key',
      organizationId: found.organizationId,
      scopes: found.scopes,
      apiKeyId: found.id,
      // Only keys that have their own bucket say so: the rest of the caller is as before.
      ...(found.rateLimit ? { rateLimit: found.rateLimit } : {}),
    };
  }

  private recordUse(id: string): void {
    if (this.lastUsedWrites.has(id)) return;
    this.lastUsedWrites.set(id, true);
    // Off the request path; a lost write only makes last_used_at a minute staler.
    this.keys.touchLastUsed(id, this.clock.now()).catch((error: unknown) => {
      this.lastUsedWrites.delete(id);
      this.logger.warn({ err: error }, 'api key: last_used_at not written');
    });
  }
}
