import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { EntityManager, Repository } from 'typeorm';
import { poolOf } from '../database/pg-pool';
import type { Logger } from 'pino';
import { InvalidationChannel } from '../common/cache/invalidation-channel';
import { TtlCache } from '../common/cache/ttl-cache';
import { ROOT_LOGGER } from '../common/logging/root-logger';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';
import { AuditService } from '../audit/audit.service';
import { type CallerContext, type Scope, scopeSatisfies } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import {
  DISPLAY_PREFIX_LENGTH,
  generateApiKey,
  hashApiKey,
  isWellFormedApiKey,
} from './api-key-format';
import { ApiKeyDto, CreateApiKeyDto, CreatedApiKeyDto, toApiKeyResponse } from './dto/api-key.dto';
import { ApiKey } from './entities/api-key.entity';

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

/** An api_keys row as the API shows it (toApiKeyResponse), aliased in SQL. */
type ApiKeyRow = Pick<
  ApiKey,
  'id' | 'name' | 'scopes' | 'prefix' | 'lastFour' | 'createdAt' | 'expiresAt' | 'lastUsedAt'
>;
const KEY_COLUMNS = `id, name, scopes, prefix, last_four AS "lastFour", created_at AS "createdAt",
  expires_at AS "expiresAt", last_used_at AS "lastUsedAt"`;

interface CachedKey {
  id: string;
  organizationId: string;
  scopes: Scope[];
  expiresAt: number | null;
}

@Injectable()
export class ApiKeysService implements OnModuleInit, OnModuleDestroy {
  private readonly byHash = new TtlCache<CachedKey>(API_KEY_CACHE_MS);
  /** Hashes found to be no key: apart, so a flood of forged keys cannot evict the real ones. */
  private readonly unknownHashes = new TtlCache<true>(UNKNOWN_KEY_CACHE_MS);
  /** Keys whose last_used_at was written within the interval (bounded, expiring entries). */
  private readonly lastUsedWrites = new TtlCache<true>(LAST_USED_WRITE_INTERVAL_MS);
  private readonly revocations: InvalidationChannel;
  private readonly pool: Pool;

  constructor(
    @InjectRepository(ApiKey) private readonly keys: Repository<ApiKey>,
    @Inject(REDIS_CLIENT) redis: RedisClient,
    @Inject(ROOT_LOGGER) logger: Logger,
    private readonly audit: AuditService,
  ) {
    this.revocations = new InvalidationChannel(redis, 'identity:api-key-revoked', logger);
    this.pool = poolOf(keys.manager.connection);
  }

  onModuleInit(): void {
    this.revocations.listen((hashHex) => this.byHash.delete(hashHex));
  }

  onModuleDestroy(): void {
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
    if (expiresAt && expiresAt.getTime() <= Date.now()) {
      throw AppError.validation([{ field: 'expires_at', problem: 'must be in the future' }]);
    }
    const key = generateApiKey();
    const keyHash = hashApiKey(key);
    // The key and its audit event in one statement (one transaction, one round trip).
    const audit = this.audit.step(
      caller,
      { organizationId: caller.organizationId, action: 'api_key.created', targetType: 'api_key' },
      'created',
      10,
    );
    const { rows } = await this.pool.query<ApiKeyRow>({
      name: 'api_keys_create_audited',
      text: `WITH created AS (
               INSERT INTO api_keys
                 (organization_id, name, scopes, prefix, last_four, key_hash, created_by_user_id, expires_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
               RETURNING ${KEY_COLUMNS}, id::text AS audit_target_id, $9::jsonb AS audit_details),
             ${audit.sql}
             SELECT id, name, scopes, prefix, "lastFour", "createdAt", "expiresAt", "lastUsedAt"
               FROM created`,
      values: [
        caller.organizationId,
        dto.name,
        dto.scopes,
        key.slice(0, DISPLAY_PREFIX_LENGTH),
        key.slice(-4),
        keyHash,
        caller.kind === 'user' ? caller.userId : null,
        expiresAt,
        JSON.stringify({
          name: dto.name,
          scopes: dto.scopes,
          expires_at: expiresAt?.toISOString() ?? null,
        }),
        ...audit.params,
      ],
    });
    // Its first use here needs no lookup (nor the IP token that pays for one).
    this.byHash.set(keyHash.toString('hex'), {
      id: rows[0].id,
      organizationId: caller.organizationId,
      scopes: dto.scopes,
      expiresAt: expiresAt?.getTime() ?? null,
    });
    return { ...toApiKeyResponse(rows[0]), key };
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
    const { created, oldHash } = await this.keys.manager.transaction(async (manager) => {
      const rows: Array<{
        name: string;
        scopes: Scope[];
        expires_at: Date | null;
        key_hash: Buffer;
      }> = await manager.query(
        // Locked: two concurrent rolls of one key run one after the other.
        `SELECT name, scopes, expires_at, key_hash FROM api_keys
          WHERE id = $1 AND organization_id = $2 AND revoked_at IS NULL
            AND (expires_at IS NULL OR expires_at > now())
          FOR UPDATE`,
        [id, caller.organizationId],
      );
      const old = rows[0];
      if (!old) throw AppError.notFound('API key');
      const [ended]: Array<{ expires_at: Date | null }> = await manager.query(
        expiresInSeconds === 0
          ? `WITH ended AS (UPDATE api_keys SET revoked_at = now() WHERE id = $1 RETURNING revoked_at AS expires_at)
             SELECT expires_at FROM ended`
          : `WITH ended AS (
               UPDATE api_keys
                  SET expires_at = LEAST(coalesce(expires_at, 'infinity'), now() + make_interval(secs => $2))
                WHERE id = $1 RETURNING expires_at)
             SELECT expires_at FROM ended`,
        expiresInSeconds === 0 ? [id] : [id, expiresInSeconds],
      );
      const issued = await this.insertKey(manager, caller, old.name, old.scopes, null);
      await this.audit.record(manager, caller, {
        organizationId: caller.organizationId,
        action: 'api_key.rolled',
        target: { type: 'api_key', id },
        details: {
          new_key_id: issued.id,
          old_key_expires_at: ended.expires_at?.toISOString() ?? null,
        },
      });
      return { created: issued, oldHash: old.key_hash.toString('hex') };
    });
    // Every instance re-reads the old key, so its new expiry holds everywhere from now on.
    this.byHash.delete(oldHash);
    await this.revocations.publish(oldHash);
    return created;
  }

  private async insertKey(
    manager: EntityManager,
    caller: CallerContext,
    name: string,
    scopes: Scope[],
    expiresAt: Date | null,
  ): Promise<CreatedApiKeyDto> {
    const key = generateApiKey();
    const saved = await manager.save(
      manager.create(ApiKey, {
        organizationId: caller.organizationId,
        name,
        scopes,
        prefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
        lastFour: key.slice(-4),
        keyHash: hashApiKey(key),
        createdByUserId: caller.kind === 'user' ? caller.userId : null,
        expiresAt,
      }),
    );
    // Its first use here needs no lookup (nor the IP token that pays for one).
    this.byHash.set(saved.keyHash.toString('hex'), {
      id: saved.id,
      organizationId: saved.organizationId,
      scopes: saved.scopes,
      expiresAt: saved.expiresAt?.getTime() ?? null,
    });
    return { ...toApiKeyResponse(saved), key };
  }

  async list(
    organizationId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<ApiKeyDto>> {
    const query = this.keys
      .createQueryBuilder('key')
      .where('key.organization_id = :organizationId', { organizationId })
      .andWhere('key.revoked_at IS NULL')
      .orderBy('key.created_at', 'DESC')
      .addOrderBy('key.id', 'DESC')
      .take(limit + 1);
    if (startingAfter) {
      query.andWhere(
        '(key.created_at, key.id) < (SELECT k2.created_at, k2.id FROM api_keys k2 WHERE k2.id = :cursor AND k2.organization_id = :organizationId)',
        { cursor: startingAfter },
      );
    }
    const rows = await query.getMany();
    return toPage(rows, limit, toApiKeyResponse);
  }

  /** Revokes the key; refused on every instance told through Redis from the next request on. */
  async revoke(caller: CallerContext, id: string): Promise<void> {
    const audit = this.audit.step(
      caller,
      { organizationId: caller.organizationId, action: 'api_key.revoked', targetType: 'api_key' },
      'revoked',
      3,
    );
    // The revocation and its audit event in one statement (one transaction, one round trip).
    const { rows } = await this.pool.query<{ key_hash: Buffer }>({
      name: 'api_keys_revoke_audited',
      text: `WITH revoked AS (
               UPDATE api_keys SET revoked_at = now()
                WHERE id = $1 AND organization_id = $2 AND revoked_at IS NULL
                RETURNING key_hash, id::text AS audit_target_id,
                          jsonb_build_object('name', name) AS audit_details),
             ${audit.sql}
             SELECT key_hash FROM revoked`,
      values: [id, caller.organizationId, ...audit.params],
    });
    if (rows.length === 0) throw AppError.notFound('API key');
    const hashHex = rows[0].key_hash.toString('hex');
    this.byHash.delete(hashHex);
    await this.revocations.publish(hashHex);
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
      const rows: Array<{
        id: string;
        organization_id: string;
        scopes: Scope[];
        expires_at: Date | null;
      }> = await this.keys.query(
        'SELECT id, organization_id, scopes, expires_at FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL',
        [hash],
      );
      const row = rows[0];
      if (!row) {
        this.unknownHashes.set(cacheKey, true);
        return null;
      }
      found = {
        id: row.id,
        organizationId: row.organization_id,
        scopes: row.scopes,
        expiresAt: row.expires_at?.getTime() ?? null,
      };
      this.byHash.set(cacheKey, found);
    }
    if (found.expiresAt !== null && found.expiresAt <= Date.now()) return null;
    this.recordUse(found.id);
    return {
      kind: 'api_key',
      organizationId: found.organizationId,
      scopes: found.scopes,
      apiKeyId: found.id,
    };
  }

  private recordUse(id: string): void {
    if (this.lastUsedWrites.has(id)) return;
    this.lastUsedWrites.set(id, true);
    // Off the request path; a lost write only makes last_used_at a minute staler.
    this.keys
      .query(
        `UPDATE api_keys SET last_used_at = now()
          WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')`,
        [id],
      )
      .catch(() => this.lastUsedWrites.delete(id));
  }
}
