import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import type { Logger } from 'pino';
import { InvalidationChannel } from '../common/cache/invalidation-channel';
import { TtlCache } from '../common/cache/ttl-cache';
import { ROOT_LOGGER } from '../common/logging/root-logger';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';
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
/** `last_used_at` is written at most this often per key, not on every request. */
const LAST_USED_WRITE_INTERVAL_MS = 60_000;

interface CachedKey {
  id: string;
  organizationId: string;
  scopes: Scope[];
  expiresAt: number | null;
}

@Injectable()
export class ApiKeysService implements OnModuleInit, OnModuleDestroy {
  private readonly byHash = new TtlCache<CachedKey | null>(API_KEY_CACHE_MS);
  private readonly lastUsedWrites = new Map<string, number>();
  private readonly revocations: InvalidationChannel;

  constructor(
    @InjectRepository(ApiKey) private readonly keys: Repository<ApiKey>,
    @Inject(REDIS_CLIENT) redis: RedisClient,
    @Inject(ROOT_LOGGER) logger: Logger,
  ) {
    this.revocations = new InvalidationChannel(redis, 'identity:api-key-revoked', logger);
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
        403,
        `You cannot grant scopes you do not hold: ${excess.join(', ')}`,
      );
    }
    const expiresAt = dto.expires_at ? new Date(dto.expires_at) : null;
    if (expiresAt && expiresAt.getTime() <= Date.now()) {
      throw AppError.validation([{ field: 'expires_at', problem: 'must be in the future' }]);
    }
    const key = generateApiKey();
    const saved = await this.keys.save(
      this.keys.create({
        organizationId: caller.organizationId,
        name: dto.name,
        scopes: dto.scopes,
        prefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
        lastFour: key.slice(-4),
        keyHash: hashApiKey(key),
        createdByUserId: caller.userId ?? null,
        expiresAt,
      }),
    );
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

  /** Revokes the key; refused on this instance from the next request on. */
  async revoke(organizationId: string, id: string): Promise<void> {
    const rows: Array<{ key_hash: Buffer }> = await this.keys.query(
      // Wrapped in a CTE: TypeORM answers a bare UPDATE … RETURNING as [rows, count].
      `WITH revoked AS (
         UPDATE api_keys SET revoked_at = now()
          WHERE id = $1 AND organization_id = $2 AND revoked_at IS NULL
          RETURNING key_hash)
       SELECT key_hash FROM revoked`,
      [id, organizationId],
    );
    if (rows.length === 0) throw AppError.notFound('API key');
    const hashHex = rows[0].key_hash.toString('hex');
    this.byHash.delete(hashHex);
    this.revocations.publish(hashHex);
  }

  /** The caller an API key stands for, or null for a malformed, unknown, revoked or expired key. */
  async authenticate(key: string): Promise<CallerContext | null> {
    if (!isWellFormedApiKey(key)) return null;
    const hash = hashApiKey(key);
    const cacheKey = hash.toString('hex');
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
      found = row
        ? {
            id: row.id,
            organizationId: row.organization_id,
            scopes: row.scopes,
            expiresAt: row.expires_at?.getTime() ?? null,
          }
        : null;
      this.byHash.set(cacheKey, found);
    }
    if (!found || (found.expiresAt !== null && found.expiresAt <= Date.now())) return null;
    this.recordUse(found.id);
    return {
      kind: 'api_key',
      organizationId: found.organizationId,
      scopes: found.scopes,
      apiKeyId: found.id,
    };
  }

  private recordUse(id: string): void {
    const now = Date.now();
    const last = this.lastUsedWrites.get(id);
    if (last !== undefined && now - last < LAST_USED_WRITE_INTERVAL_MS) return;
    this.lastUsedWrites.set(id, now);
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
