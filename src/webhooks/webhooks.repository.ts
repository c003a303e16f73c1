import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { Cte, sql, withEntries } from '../database/sql';
import { webhookEventStep } from './webhook-event.step';
import type { SubscribableEventType } from './webhook-event-types';
import type { WebhookAttemptStatus } from './entities/webhook-delivery-attempt.entity';
import type { WebhookEndpointStatus } from './entities/webhook-endpoint.entity';

export interface WebhookEndpointRow {
  id: string;
  url: string;
  description: string | null;
  events: string[];
  status: WebhookEndpointStatus;
  created_at: Date;
}

export interface DeliveryAttemptRow {
  id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  status: WebhookAttemptStatus;
  response_status: number | null;
  error: string | null;
  duration_ms: number | null;
  created_at: Date;
  next_attempt_at: Date | null;
}

/** A claimed attempt with what it takes to make it. */
export interface ClaimedAttempt {
  id: string;
  lock_token: string;
  organization_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  url: string;
  secret: string;
  endpoint_status: WebhookEndpointStatus;
  data: Record<string, unknown>;
  event_created_at: Date;
}

/** What became of a claimed attempt. `retryInMs` set: the next attempt is scheduled then. */
export interface AttemptOutcome {
  id: string;
  lockToken: string;
  status: 'succeeded' | 'failed';
  responseStatus: number | null;
  error: string | null;
  durationMs: number | null;
  retryInMs: number | null;
}

export interface EndpointChanges {
  url?: string;
  events?: string[];
  description?: string | null;
  status?: WebhookEndpointStatus;
}

const ENDPOINT_COLUMNS = 'id, url, description, events, status, created_at';

/** The SQL of outbound webhooks: endpoints, the event outbox and the delivery attempts. */
@Injectable()
export class WebhooksRepository {
  private readonly pool: Pool;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly database: Database,
  ) {
    this.pool = database.pool;
  }

  // ---------------------------------------------------------------- endpoints

  /**
   * Adds an endpoint unless the organization already has `limit`; undefined then. The
   * organization's creates are serialized by a transaction-level advisory lock, taken in a
   * statement of its own so that the count after it sees every create committed before.
   */
  async insertEndpointWithin(
    manager: EntityManager,
    organizationId: string,
    limit: number,
    fields: { url: string; events: string[]; description: string | null; secret: string },
  ): Promise<WebhookEndpointRow | undefined> {
    await manager.query(
      `SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || $1, 0))`,
      [organizationId],
    );
    const rows: WebhookEndpointRow[] = await manager.query(
      `INSERT INTO webhook_endpoints (organization_id, url, events, description, secret)
       SELECT $1, $2, $3, $4, $5
        WHERE (SELECT count(*) FROM webhook_endpoints WHERE organization_id = $1) < $6
       RETURNING ${ENDPOINT_COLUMNS}`,
      [organizationId, fields.url, fields.events, fields.description, fields.secret, limit],
    );
    return rows[0];
  }

  /** Oldest first (the order they were added), paged by the id of the last one seen. */
  findEndpointPage(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<WebhookEndpointRow[]> {
    return this.dataSource.query(
      `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints
        WHERE organization_id = $1
          AND ($2::uuid IS NULL OR (created_at, id) > (
                SELECT e2.created_at, e2.id FROM webhook_endpoints e2
                 WHERE e2.id = $2::uuid AND e2.organization_id = $1))
        ORDER BY created_at, id
        LIMIT $3`,
      [organizationId, startingAfter ?? null, limit + 1],
    );
  }

  async findEndpoint(organizationId: string, id: string): Promise<WebhookEndpointRow | undefined> {
    const rows: WebhookEndpointRow[] = await this.dataSource.query(
      `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE organization_id = $1 AND id = $2`,
      [organizationId, id],
    );
    return rows[0];
  }

  /** Sets the given fields; answers the endpoint, or undefined when the organization has none with this id. */
  async updateEndpoint(
    manager: EntityManager,
    organizationId: string,
    id: string,
    changes: EndpointChanges,
  ): Promise<WebhookEndpointRow | undefined> {
    // TypeORM answers an UPDATE … RETURNING as [rows, affected].
    const [rows]: [WebhookEndpointRow[], number] = await manager.query(
      `UPDATE webhook_endpoints
          SET url = CASE WHEN $3::boolean THEN $4::text ELSE url END,
              events = CASE WHEN $5::boolean THEN $6::text[] ELSE events END,
              description = CASE WHEN $7::boolean THEN $8::text ELSE description END,
              status = CASE WHEN $9::boolean THEN $10::text ELSE status END,
              updated_at = now()
        WHERE organization_id = $1 AND id = $2
        RETURNING ${ENDPOINT_COLUMNS}`,
      [
        organizationId,
        id,
        changes.url !== undefined,
        changes.url ?? null,
        changes.events !== undefined,
        changes.events ?? null,
        changes.description !== undefined,
        changes.description ?? null,
        changes.status !== undefined,
        changes.status ?? null,
      ],
    );
    return rows[0];
  }

  /**
   * A disabled endpoint receives nothing: its pending attempts end as failed, with no next one.
   * (An attempt already in flight finishes; recording it schedules no further attempt.)
   */
  async cancelPendingAttempts(
    manager: EntityManager,
    organizationId: string,
    endpointId: string,
  ): Promise<void> {
    await manager.query(
      `UPDATE webhook_delivery_attempts
          SET status = 'failed', error = 'endpoint disabled', next_attempt_at = NULL
        WHERE organization_id = $1 AND endpoint_id = $2 AND status = 'pending'
          AND (locked_until IS NULL OR locked_until <= now())`,
      [organizationId, endpointId],
    );
  }

  /** Its attempts go with it (ON DELETE CASCADE). Answers whether there was one. */
  async deleteEndpoint(
    manager: EntityManager,
    organizationId: string,
    id: string,
  ): Promise<boolean> {
    // TypeORM answers a DELETE as [rows, affected].
    const [, affected]: [unknown[], number] = await manager.query(
      `DELETE FROM webhook_endpoints WHERE organization_id = $1 AND id = $2`,
      [organizationId, id],
    );
    return affected > 0;
  }

  // ---------------------------------------------------------------- the outbox

  /** One event, in the caller's transaction (see webhook-event.step.ts). */
  async insertEvent(
    manager: EntityManager,
    organizationId: string,
    type: SubscribableEventType,
    data: Record<string, unknown>,
  ): Promise<void> {
    const source = new Cte(
      'webhook_source',
      sql`SELECT ${JSON.stringify(data)}::jsonb AS webhook_data`,
      ['webhook_data'],
    );
    await this.database.rows(
      withEntries([source, webhookEventStep(source, { organizationId, type })], sql`SELECT 1`),
      { manager },
    );
  }

  /** A `ping` event for one endpoint only, if it is enabled; answers the event id (or undefined). */
  async insertPing(organizationId: string, endpointId: string): Promise<string | undefined> {
    const rows: Array<{ id: string }> = await this.dataSource.query(
      `WITH endpoint AS (
         SELECT id FROM webhook_endpoints
          WHERE organization_id = $1 AND id = $2 AND status = 'enabled'
          FOR KEY SHARE),
       event AS (
         INSERT INTO webhook_events (organization_id, type, data)
         SELECT $1, 'ping', jsonb_build_object('webhook_endpoint_id', endpoint.id) FROM endpoint
         RETURNING id),
       attempt AS (
         INSERT INTO webhook_delivery_attempts
           (organization_id, endpoint_id, event_id, event_type, attempt, next_attempt_at)
         SELECT $1, $2, event.id, 'ping', 1, now() FROM event)
       SELECT id FROM event`,
      [organizationId, endpointId],
    );
    return rows[0]?.id;
  }

  // ---------------------------------------------------------------- attempts

  /** Newest first, paged by the id of the last attempt seen. */
  findAttemptPage(
    organizationId: string,
    endpointId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<DeliveryAttemptRow[]> {
    return this.dataSource.query(
      `SELECT id, event_id, event_type, attempt, status, response_status, error, duration_ms,
              created_at, next_attempt_at
         FROM webhook_delivery_attempts
        WHERE organization_id = $1 AND endpoint_id = $2
          AND ($3::uuid IS NULL OR (created_at, id) < (
                SELECT a2.created_at, a2.id FROM webhook_delivery_attempts a2
                 WHERE a2.id = $3::uuid AND a2.organization_id = $1 AND a2.endpoint_id = $2))
        ORDER BY created_at DESC, id DESC
        LIMIT $4`,
      [organizationId, endpointId, startingAfter ?? null, limit + 1],
    );
  }

  /**
   * Claims up to `limit` due attempts for this instance, in one short statement (its own
   * transaction): FOR UPDATE SKIP LOCKED lets instances claim side by side without waiting or
   * taking the same row, and the lease (`locked_until`) keeps the row from every other instance
   * until the outcome is recorded, or until the lease runs out because this instance died.
   */
  async claimDue(limit: number, leaseMs: number, lockToken: string): Promise<ClaimedAttempt[]> {
    const { rows } = await this.pool.query<ClaimedAttempt>({
      name: 'webhook_attempts_claim',
      text: `WITH due AS (
               SELECT id FROM webhook_delivery_attempts
                WHERE status = 'pending' AND next_attempt_at <= now()
                  AND (locked_until IS NULL OR locked_until <= now())
                ORDER BY next_attempt_at
                LIMIT $1
                FOR UPDATE SKIP LOCKED),
             claimed AS (
               UPDATE webhook_delivery_attempts a
                  SET locked_until = now() + $2 * interval '1 millisecond', lock_token = $3
                 FROM due WHERE a.id = due.id
               RETURNING a.id, a.lock_token, a.organization_id, a.endpoint_id, a.event_id,
                         a.event_type, a.attempt)
             SELECT c.*, e.url, e.secret, e.status AS endpoint_status, ev.data,
                    ev.created_at AS event_created_at
               FROM claimed c
               JOIN webhook_endpoints e ON e.id = c.endpoint_id AND e.organization_id = c.organization_id
               JOIN webhook_events ev ON ev.id = c.event_id AND ev.organization_id = c.organization_id`,
      values: [limit, leaseMs, lockToken],
    });
    return rows;
  }

  /**
   * Records outcomes in one statement: each attempt still held with its token becomes succeeded
   * or failed, and a failed one with `retryInMs` gets its next attempt, pending, in the same
   * statement. An attempt whose lease was lost (this instance was too slow and another took it
   * over) is left alone: only the holder of the current token records an outcome.
   */
  async recordOutcomes(outcomes: AttemptOutcome[]): Promise<void> {
    await this.pool.query({
      name: 'webhook_attempts_record',
      text: `WITH outcome AS (
               SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::int[], $5::text[],
                                    $6::int[], $7::int[])
                        AS o(id, lock_token, status, response_status, error, duration_ms, retry_ms)),
             done AS (
               UPDATE webhook_delivery_attempts a
                  SET status = o.status, response_status = o.response_status, error = o.error,
                      duration_ms = o.duration_ms,
                      -- An endpoint disabled meanwhile gets no further attempt.
                      next_attempt_at = CASE WHEN e.status = 'enabled'
                                        THEN now() + o.retry_ms * interval '1 millisecond' END,
                      locked_until = NULL, lock_token = NULL
                 FROM outcome o, webhook_endpoints e
                WHERE a.id = o.id AND a.lock_token = o.lock_token AND a.status = 'pending'
                  AND e.id = a.endpoint_id AND e.organization_id = a.organization_id
               RETURNING a.organization_id, a.endpoint_id, a.event_id, a.event_type, a.attempt,
                         a.next_attempt_at)
             INSERT INTO webhook_delivery_attempts
               (organization_id, endpoint_id, event_id, event_type, attempt, next_attempt_at)
             SELECT organization_id, endpoint_id, event_id, event_type, attempt + 1, next_attempt_at
               FROM done WHERE next_attempt_at IS NOT NULL
             ON CONFLICT DO NOTHING`,
      values: [
        outcomes.map((o) => o.id),
        outcomes.map((o) => o.lockToken),
        outcomes.map((o) => o.status),
        outcomes.map((o) => o.responseStatus),
        outcomes.map((o) => o.error),
        outcomes.map((o) => o.durationMs),
        outcomes.map((o) => o.retryInMs),
      ],
    });
  }

  /** Gives claimed attempts back (shutdown): due again at once, for any instance. */
  async release(attempts: Array<{ id: string; lockToken: string }>): Promise<void> {
    await this.pool.query(
      `UPDATE webhook_delivery_attempts a SET locked_until = NULL, lock_token = NULL
         FROM unnest($1::uuid[], $2::uuid[]) AS r(id, lock_token)
        WHERE a.id = r.id AND a.lock_token = r.lock_token AND a.status = 'pending'`,
      [attempts.map((a) => a.id), attempts.map((a) => a.lockToken)],
    );
  }

  /** Attempts not yet made (due or scheduled), database-wide; the partial due index covers it. */
  async countPending(): Promise<number> {
    const { rows } = await this.pool.query<{ pending: number }>(
      `SELECT count(*)::int AS pending FROM webhook_delivery_attempts WHERE status = 'pending'`,
    );
    return rows[0].pending;
  }

  /**
   * Deletes up to `batchSize` events older than `retentionDays` whose attempts are all made
   * (their attempts go with them); answers how many. SKIP LOCKED: instances purge side by side.
   */
  async deleteEventsOlderThan(retentionDays: number, batchSize: number): Promise<number> {
    const { rows } = await this.pool.query<{ count: number }>(
      `WITH doomed AS (
         SELECT ev.id FROM webhook_events ev
          WHERE ev.created_at < now() - make_interval(days => $1)
            AND NOT EXISTS (SELECT 1 FROM webhook_delivery_attempts a
                             WHERE a.event_id = ev.id AND a.status = 'pending')
          LIMIT $2
          FOR UPDATE SKIP LOCKED),
       deleted AS (DELETE FROM webhook_events WHERE id IN (SELECT id FROM doomed) RETURNING 1)
       SELECT count(*)::int AS count FROM deleted`,
      [retentionDays, batchSize],
    );
    return rows[0]?.count ?? 0;
  }
}
