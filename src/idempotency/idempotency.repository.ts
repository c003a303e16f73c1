import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Pool } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import type { PostgresConnectionOptions } from 'typeorm/driver/postgres/PostgresConnectionOptions';
import type { IdempotencyScopeType } from './entities/idempotency-key.entity';

/** Which key: the organization's (or the user's) key string. */
export interface KeyRef {
  scopeType: IdempotencyScopeType;
  scopeId: string;
  key: string;
}

/** A request's claim on a key: the lease is held by `requestId`. */
export interface ClaimRef extends KeyRef {
  requestId: string;
}

export interface StoredKey {
  requestHash: Buffer;
  /** Null while the first request still runs. */
  responseStatus: number | null;
  responseBody: string | null;
  /** Past retention: as good as absent. */
  expired: boolean;
  /** Still running, but its request stopped renewing the lease. */
  leaseLapsed: boolean;
}

/** Connections of the key statements' own pool, per instance (opened on demand). */
const KEY_POOL_SIZE = 4;

/**
 * The SQL of `idempotency_keys`. Every statement but `completeWithin` (which joins the caller's
 * transaction) is one round trip outside any transaction, on a small pool of its own whose
 * sessions commit asynchronously (`synchronous_commit = off`): a keyed request makes two more
 * commits than the work itself, and waiting for two more WAL flushes would cost it far more
 * than the statements do. What that can lose is only what a crash between the work's commit
 * and the key's can lose anyway (docs/idempotency.md, "What a crash leaves"): a claim is made
 * durable by the work's own synchronous commit, which flushes the WAL before it; an answer or a
 * release lost to a PostgreSQL crash in the next fraction of a second leaves the key "in
 * progress" until its lease lapses. Times are the database's (`now()`), so instances whose
 * clocks disagree still agree on leases and expiry.
 */
@Injectable()
export class IdempotencyRepository implements OnApplicationShutdown {
  private readonly pool: Pool;

  constructor(@InjectDataSource() dataSource: DataSource) {
    const options = dataSource.options as PostgresConnectionOptions;
    this.pool = new Pool({
      ...(options.extra as Record<string, unknown>),
      connectionString: options.url,
      max: KEY_POOL_SIZE,
      application_name: 'personality-api idempotency',
      options: '-c synchronous_commit=off',
    });
    // An idle connection that fails is replaced on the next checkout; without a listener
    // its error would end the process.
    this.pool.on('error', () => undefined);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.pool.end();
  }

  /**
   * Claims a key no one holds: true when it was new. The common case, one INSERT; an existing key
   * is not locked by it (a burst of retries does not queue on its row).
   */
  async insert(claim: ClaimRef, requestHash: Buffer, leaseMs: number): Promise<boolean> {
    const result = await this.pool.query({
      name: 'idempotency-insert',
      text: `INSERT INTO idempotency_keys (scope_type, scope_id, key, request_hash, locked_by, locked_until)
             VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6 / 1000.0))
             ON CONFLICT (scope_type, scope_id, key) DO NOTHING`,
      values: [claim.scopeType, claim.scopeId, claim.key, requestHash, claim.requestId, leaseMs],
    });
    return result.rowCount === 1;
  }

  /**
   * Takes an existing key over, if it is past retention or its first request (with this same
   * request hash) stopped renewing its lease, a crashed instance. The row lock lets one of
   * several concurrent retries win; the others find it held again.
   */
  async takeOver(
    claim: ClaimRef,
    requestHash: Buffer,
    leaseMs: number,
    retentionMs: number,
  ): Promise<boolean> {
    const result = await this.pool.query({
      name: 'idempotency-take-over',
      text: `UPDATE idempotency_keys
                SET request_hash = $4, locked_by = $5,
                    locked_until = now() + make_interval(secs => $6 / 1000.0), created_at = now(),
                    response_status = NULL, response_body = NULL, completed_at = NULL
              WHERE scope_type = $1 AND scope_id = $2 AND key = $3
                AND (created_at <= now() - make_interval(secs => $7 / 1000.0)
                     OR (response_status IS NULL AND locked_until < now() AND request_hash = $4))`,
      values: [
        claim.scopeType,
        claim.scopeId,
        claim.key,
        requestHash,
        claim.requestId,
        leaseMs,
        retentionMs,
      ],
    });
    return result.rowCount === 1;
  }

  /** The key as it stands, with whether it is past retention or its lease has lapsed. */
  async find(ref: KeyRef, retentionMs: number): Promise<StoredKey | undefined> {
    const result = await this.pool.query<{
      request_hash: Buffer;
      response_status: number | null;
      response_body: string | null;
      expired: boolean;
      lease_lapsed: boolean;
    }>({
      name: 'idempotency-find',
      text: `SELECT request_hash, response_status, response_body,
                    created_at <= now() - make_interval(secs => $4 / 1000.0) AS expired,
                    coalesce(locked_until < now(), false) AS lease_lapsed
               FROM idempotency_keys
              WHERE scope_type = $1 AND scope_id = $2 AND key = $3`,
      values: [ref.scopeType, ref.scopeId, ref.key, retentionMs],
    });
    const row = result.rows[0];
    return row
      ? {
          requestHash: row.request_hash,
          responseStatus: row.response_status,
          responseBody: row.response_body,
          expired: row.expired,
          leaseLapsed: row.lease_lapsed,
        }
      : undefined;
  }

  /** Stores the answer of the request holding the lease; false if it no longer holds it. */
  async complete(claim: ClaimRef, status: number, body: string | null): Promise<boolean> {
    const result = await this.pool.query({
      name: 'idempotency-complete',
      text: COMPLETE_SQL,
      values: [claim.scopeType, claim.scopeId, claim.key, claim.requestId, status, body],
    });
    return result.rowCount === 1;
  }

  /** `complete`, inside the caller's transaction: the answer commits with the work or not at all. */
  async completeWithin(
    manager: EntityManager,
    claim: ClaimRef,
    status: number,
    body: string | null,
  ): Promise<void> {
    await manager.query(COMPLETE_SQL, [
      claim.scopeType,
      claim.scopeId,
      claim.key,
      claim.requestId,
      status,
      body,
    ]);
  }

  /** Gives the key up (an answer that is not stored): the next request with it runs afresh. */
  async release(claim: ClaimRef): Promise<void> {
    await this.pool.query({
      name: 'idempotency-release',
      text: `DELETE FROM idempotency_keys
              WHERE scope_type = $1 AND scope_id = $2 AND key = $3 AND locked_by = $4
                AND response_status IS NULL`,
      values: [claim.scopeType, claim.scopeId, claim.key, claim.requestId],
    });
  }

  /** Extends the lease of a request still running; false if it no longer holds it. */
  async renew(claim: ClaimRef, leaseMs: number): Promise<boolean> {
    const result = await this.pool.query({
      name: 'idempotency-renew',
      text: `UPDATE idempotency_keys SET locked_until = now() + make_interval(secs => $5 / 1000.0)
              WHERE scope_type = $1 AND scope_id = $2 AND key = $3 AND locked_by = $4
                AND response_status IS NULL`,
      values: [claim.scopeType, claim.scopeId, claim.key, claim.requestId, leaseMs],
    });
    return result.rowCount === 1;
  }

  /**
   * Deletes up to `batchSize` keys past retention (none whose request still holds a live lease),
   * answering how many. SKIP LOCKED lets any number of instances purge at once without waiting
   * on each other or deleting a row twice; each batch is one short statement.
   */
  async deleteOlderThan(retentionMs: number, batchSize: number): Promise<number> {
    const result = await this.pool.query<{ count: number }>(
      `WITH doomed AS (
         SELECT scope_type, scope_id, key FROM idempotency_keys
          WHERE created_at <= now() - make_interval(secs => $1 / 1000.0)
            AND (locked_until IS NULL OR locked_until < now())
          LIMIT $2
          FOR UPDATE SKIP LOCKED),
       deleted AS (
         DELETE FROM idempotency_keys k USING doomed d
          WHERE k.scope_type = d.scope_type AND k.scope_id = d.scope_id AND k.key = d.key
         RETURNING 1)
       SELECT count(*)::int AS count FROM deleted`,
      [retentionMs, batchSize],
    );
    return result.rows[0]?.count ?? 0;
  }
}

const COMPLETE_SQL = `UPDATE idempotency_keys
    SET response_status = $5, response_body = $6, completed_at = now(),
        locked_by = NULL, locked_until = NULL
  WHERE scope_type = $1 AND scope_id = $2 AND key = $3 AND locked_by = $4`;
