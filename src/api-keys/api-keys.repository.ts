import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { poolOf } from '../database/pg-pool';
import { WebhookEventsService } from '../webhooks/webhook-events.service';
import type { ApiKey } from './entities/api-key.entity';

/** An api_keys row as the API shows it (toApiKeyResponse), aliased in SQL. */
export type ApiKeyRow = Pick<
  ApiKey,
  'id' | 'name' | 'scopes' | 'prefix' | 'lastFour' | 'createdAt' | 'expiresAt' | 'lastUsedAt'
>;

/** What authenticating a key needs from its row. */
export type ApiKeyCredentialRow = Pick<ApiKey, 'id' | 'organizationId' | 'scopes' | 'expiresAt'>;

/** A key about to be stored: its hash and display parts, never the key itself. */
export type NewApiKey = Pick<
  ApiKey,
  | 'organizationId'
  | 'name'
  | 'scopes'
  | 'prefix'
  | 'lastFour'
  | 'keyHash'
  | 'createdByUserId'
  | 'expiresAt'
>;

/**
 * An audit CTE step (AuditService.step) for a statement of this repository, which names the CTE
 * it draws from and the number of its first parameter.
 */
export type AuditStep = (source: string, firstParam: number) => { sql: string; params: unknown[] };

const KEY_COLUMNS = `id, name, scopes, prefix, last_four AS "lastFour", created_at AS "createdAt",
  expires_at AS "expiresAt", last_used_at AS "lastUsedAt"`;

const INSERT_KEY = `INSERT INTO api_keys
  (organization_id, name, scopes, prefix, last_four, key_hash, created_by_user_id, expires_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`;

function insertParams(key: NewApiKey): unknown[] {
  return [
    key.organizationId,
    key.name,
    key.scopes,
    key.prefix,
    key.lastFour,
    key.keyHash,
    key.createdByUserId,
    key.expiresAt,
  ];
}

/**
 * Every query of api_keys, as SQL text: through the pool for the one-statement writes and the
 * lookup on the authentication path (one round trip, named so PostgreSQL plans them once), through
 * the caller's EntityManager inside a transaction.
 */
@Injectable()
export class ApiKeysRepository {
  private readonly pool: Pool;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly webhookEvents: WebhookEventsService,
  ) {
    this.pool = poolOf(dataSource);
  }

  /** The key and its audit event in one statement (one transaction, one round trip). */
  async insertAudited(key: NewApiKey, audit: AuditStep): Promise<ApiKeyRow> {
    const step = audit('created', 10);
    const event = this.webhookEvents.step('created', 10 + step.params.length, {
      organizationId: key.organizationId,
      type: 'api_key.created',
    });
    const { rows } = await this.pool.query<ApiKeyRow>({
      name: 'api_keys_create_audited',
      text: `WITH created AS (
               ${INSERT_KEY}
               RETURNING ${KEY_COLUMNS}, id::text AS audit_target_id, $9::jsonb AS audit_details,
                         jsonb_build_object('id', id, 'name', name, 'scopes', scopes,
                                            'expires_at', expires_at) AS webhook_data),
             ${step.sql},
             ${event.sql}
             SELECT id, name, scopes, prefix, "lastFour", "createdAt", "expiresAt", "lastUsedAt"
               FROM created`,
      values: [
        ...insertParams(key),
        JSON.stringify({
          name: key.name,
          scopes: key.scopes,
          expires_at: key.expiresAt?.toISOString() ?? null,
        }),
        ...step.params,
        ...event.params,
      ],
    });
    return rows[0];
  }

  /** In the caller's transaction (a roll issues the new key with the old one's end). */
  async insert(manager: EntityManager, key: NewApiKey): Promise<ApiKeyRow> {
    const rows: ApiKeyRow[] = await manager.query(
      `${INSERT_KEY} RETURNING ${KEY_COLUMNS}`,
      insertParams(key),
    );
    return rows[0];
  }

  /**
   * The organization's live (not revoked, not expired at `now`) key, locked until the
   * transaction ends: two concurrent rolls of one key run one after the other.
   */
  async lockLive(
    manager: EntityManager,
    id: string,
    organizationId: string,
    now: Date,
  ): Promise<Pick<ApiKey, 'name' | 'scopes' | 'keyHash'> | undefined> {
    const rows: Array<Pick<ApiKey, 'name' | 'scopes' | 'keyHash'>> = await manager.query(
      `SELECT name, scopes, key_hash AS "keyHash" FROM api_keys
        WHERE id = $1 AND organization_id = $2 AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > $3)
        FOR UPDATE`,
      [id, organizationId, now],
    );
    return rows[0];
  }

  // UPDATEs through manager.query sit in a CTE: TypeORM answers a bare UPDATE ... RETURNING as
  // [rows, rowCount], a SELECT as rows.

  /** Revokes the key now; answers when it stopped working. */
  async revokeNow(manager: EntityManager, id: string): Promise<Date> {
    const rows: Array<{ endsAt: Date }> = await manager.query(
      `WITH ended AS (UPDATE api_keys SET revoked_at = now() WHERE id = $1 RETURNING revoked_at)
       SELECT revoked_at AS "endsAt" FROM ended`,
      [id],
    );
    return rows[0].endsAt;
  }

  /** Brings the key's expiry forward to `endsAt` unless it already expires sooner; answers it. */
  async expireBy(manager: EntityManager, id: string, endsAt: Date): Promise<Date> {
    const rows: Array<{ endsAt: Date }> = await manager.query(
      `WITH ended AS (
         UPDATE api_keys SET expires_at = LEAST(coalesce(expires_at, 'infinity'), $2::timestamptz)
          WHERE id = $1 RETURNING expires_at)
       SELECT expires_at AS "endsAt" FROM ended`,
      [id, endsAt],
    );
    return rows[0].endsAt;
  }

  /**
   * Revokes the organization's key and writes its audit event in one statement; answers the
   * key's hash, or undefined when it has no such live key.
   */
  async revokeAudited(
    id: string,
    organizationId: string,
    audit: AuditStep,
  ): Promise<Buffer | undefined> {
    const step = audit('revoked', 3);
    const event = this.webhookEvents.step('revoked', 3 + step.params.length, {
      organizationId,
      type: 'api_key.revoked',
    });
    const { rows } = await this.pool.query<{ key_hash: Buffer }>({
      name: 'api_keys_revoke_audited',
      text: `WITH revoked AS (
               UPDATE api_keys SET revoked_at = now()
                WHERE id = $1 AND organization_id = $2 AND revoked_at IS NULL
                RETURNING key_hash, id::text AS audit_target_id,
                          jsonb_build_object('name', name) AS audit_details,
                          jsonb_build_object('id', id, 'name', name,
                                             'revoked_at', revoked_at) AS webhook_data),
             ${step.sql},
             ${event.sql}
             SELECT key_hash FROM revoked`,
      values: [id, organizationId, ...step.params, ...event.params],
    });
    return rows[0]?.key_hash;
  }

  /** Newest first, after the key `startingAfter` of the same organization; `limit + 1` rows. */
  findPageForOrganization(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<ApiKeyRow[]> {
    return this.pool
      .query<ApiKeyRow>({
        name: 'api_keys_page',
        text: `SELECT ${KEY_COLUMNS} FROM api_keys
                WHERE organization_id = $1 AND revoked_at IS NULL
                  AND ($2::uuid IS NULL OR (created_at, id) < (
                        SELECT k2.created_at, k2.id FROM api_keys k2
                         WHERE k2.id = $2::uuid AND k2.organization_id = $1))
                ORDER BY created_at DESC, id DESC
                LIMIT $3`,
        values: [organizationId, startingAfter ?? null, limit + 1],
      })
      .then(({ rows }) => rows);
  }

  /** The unrevoked key with this hash (its expiry is for the caller to judge). */
  async findUnrevokedByHash(keyHash: Buffer): Promise<ApiKeyCredentialRow | undefined> {
    const { rows } = await this.pool.query<ApiKeyCredentialRow>({
      name: 'api_keys_by_hash',
      text: `SELECT id, organization_id AS "organizationId", scopes, expires_at AS "expiresAt"
               FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL`,
      values: [keyHash],
    });
    return rows[0];
  }

  /** Sets last_used_at unless it was set within the last minute (another instance did). */
  async touchLastUsed(id: string): Promise<void> {
    await this.pool.query({
      name: 'api_keys_touch_last_used',
      text: `UPDATE api_keys SET last_used_at = now()
              WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')`,
      values: [id],
    });
  }
}
