import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import type { Row } from '../database/row';
import { Cte, raw, sql, withEntries } from '../database/sql';
import { webhookEventStep } from './webhook-event.step';
import type { SubscribableEventType } from './webhook-event-types';
import type { WebhookDeliveryAttempt } from './entities/webhook-delivery-attempt.entity';
import type { WebhookEndpoint, WebhookEndpointStatus } from './entities/webhook-endpoint.entity';
import type { WebhookEvent } from './entities/webhook-event.entity';

export type WebhookEndpointRow = Row<
  WebhookEndpoint,
  'id' | 'url' | 'description' | 'events' | 'status' | 'createdAt'
>;

export type DeliveryAttemptRow = Row<
  WebhookDeliveryAttempt,
  | 'id'
  | 'eventId'
  | 'eventType'
  | 'attempt'
  | 'status'
  | 'responseStatus'
  | 'error'
  | 'durationMs'
  | 'createdAt'
  | 'nextAttemptAt'
>;

/** A claimed attempt with what it takes to make it: its endpoint's and its event's columns. */
export type ClaimedAttempt = Row<
  WebhookDeliveryAttempt,
  'id' | 'organizationId' | 'endpointId' | 'eventId' | 'eventType' | 'attempt'
> &
  Row<WebhookEndpoint, 'url' | 'secret'> &
  Row<WebhookEvent, 'data'> & {
    /** Set by the claim. */
    lock_token: string;
    endpoint_status: WebhookEndpoint['status'];
    event_created_at: WebhookEvent['createdAt'];
  };

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

const ENDPOINT_COLUMNS = raw('id, url, description, events, status, created_at');

/**
 * The SQL of outbound webhooks: endpoints, the event outbox and the delivery attempts. Every
 * time a rule reads (due, leased, retried at, past retention) is the caller's Clock's.
 */
@Injectable()
export class WebhooksRepository {
  constructor(private readonly database: Database) {}

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
    await this.database.rows(
      sql`SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || ${organizationId}, 0))`,
      { manager },
    );
    return this.database.row<WebhookEndpointRow>(
      sql`INSERT INTO webhook_endpoints (organization_id, url, events, description, secret)
          SELECT ${organizationId}::uuid, ${fields.url}, ${fields.events}::text[],
                 ${fields.description}, ${fields.secret}
           WHERE (SELECT count(*) FROM webhook_endpoints
                   WHERE organization_id = ${organizationId}) < ${limit}
          RETURNING ${ENDPOINT_COLUMNS}`,
      { manager },
    );
  }

  /** Oldest first (the order they were added), paged by the id of the last one seen. */
  findEndpointPage(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<WebhookEndpointRow[]> {
    const page: Keyset = {
      table: 'webhook_endpoints',
      cursor: startingAfter,
      scope: { organization_id: organizationId },
      order: 'asc',
    };
    return this.database.rows<WebhookEndpointRow>(
      sql`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints
           WHERE organization_id = ${organizationId} AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  findEndpoint(organizationId: string, id: string): Promise<WebhookEndpointRow | undefined> {
    return this.database.row<WebhookEndpointRow>(
      sql`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints
           WHERE organization_id = ${organizationId} AND id = ${id}`,
    );
  }

  /**
   * Sets the given fields (and `updated_at` to `at`); answers the endpoint, or undefined when the
   * organization has none with this id.
   */
  updateEndpoint(
    manager: EntityManager,
    organizationId: string,
    id: string,
    changes: EndpointChanges,
    at: Date,
  ): Promise<WebhookEndpointRow | undefined> {
    return this.database.row<WebhookEndpointRow>(
      sql`UPDATE webhook_endpoints
             SET url = CASE WHEN ${changes.url !== undefined}::boolean
                            THEN ${changes.url ?? null}::text ELSE url END,
                 events = CASE WHEN ${changes.events !== undefined}::boolean
                               THEN ${changes.events ?? null}::text[] ELSE events END,
                 description = CASE WHEN ${changes.description !== undefined}::boolean
                                    THEN ${changes.description ?? null}::text ELSE description END,
                 status = CASE WHEN ${changes.status !== undefined}::boolean
                               THEN ${changes.status ?? null}::text ELSE status END,
                 updated_at = ${at}
           WHERE organization_id = ${organizationId} AND id = ${id}
           RETURNING ${ENDPOINT_COLUMNS}`,
      { manager },
    );
  }

  /**
   * A disabled endpoint receives nothing: its pending attempts end as failed, with no next one.
   * (An attempt in flight at `now`, its lease held, finishes; recording it schedules no further
   * attempt.)
   */
  async cancelPendingAttempts(
    manager: EntityManager,
    organizationId: string,
    endpointId: string,
    now: Date,
  ): Promise<void> {
    await this.database.rows(
      sql`UPDATE webhook_delivery_attempts
             SET status = 'failed', error = 'endpoint disabled', next_attempt_at = NULL
           WHERE organization_id = ${organizationId} AND endpoint_id = ${endpointId}
             AND status = 'pending' AND (locked_until IS NULL OR locked_until <= ${now})`,
      { manager },
    );
  }

  /** Its attempts go with it (ON DELETE CASCADE). Answers whether there was one. */
  async deleteEndpoint(
    manager: EntityManager,
    organizationId: string,
    id: string,
  ): Promise<boolean> {
    const deleted = await this.database.count(
      sql`DELETE FROM webhook_endpoints WHERE organization_id = ${organizationId} AND id = ${id}`,
      { manager },
    );
    return deleted > 0;
  }

  // ---------------------------------------------------------------- the outbox

  /** One event, in the caller's transaction, first due at `at` (see webhook-event.step.ts). */
  async insertEvent(
    manager: EntityManager,
    organizationId: string,
    type: SubscribableEventType,
    data: Record<string, unknown>,
    at: Date,
  ): Promise<void> {
    const source = new Cte(
      'webhook_source',
      sql`SELECT ${JSON.stringify(data)}::jsonb AS webhook_data`,
      ['webhook_data'],
    );
    await this.database.rows(
      withEntries([source, webhookEventStep(source, { organizationId, type, at })], sql`SELECT 1`),
      { manager },
    );
  }

  /**
   * A `ping` event for one endpoint only, if it is enabled, due at `at`; answers the event id
   * (or undefined).
   */
  async insertPing(
    organizationId: string,
    endpointId: string,
    at: Date,
  ): Promise<string | undefined> {
    const row = await this.database.row<{ id: string }>(
      sql`WITH endpoint AS (
            SELECT id FROM webhook_endpoints
             WHERE organization_id = ${organizationId} AND id = ${endpointId} AND status = 'enabled'
             FOR KEY SHARE),
          event AS (
            INSERT INTO webhook_events (organization_id, type, data)
            SELECT ${organizationId}::uuid, 'ping',
                   jsonb_build_object('webhook_endpoint_id', endpoint.id)
              FROM endpoint
            RETURNING id),
          attempt AS (
            INSERT INTO webhook_delivery_attempts
              (organization_id, endpoint_id, event_id, event_type, attempt, next_attempt_at)
            SELECT ${organizationId}::uuid, ${endpointId}::uuid, event.id, 'ping', 1,
                   ${at}::timestamptz
              FROM event)
          SELECT id FROM event`,
    );
    return row?.id;
  }

  // ---------------------------------------------------------------- attempts

  /** Newest first, paged by the id of the last attempt seen. */
  findAttemptPage(
    organizationId: string,
    endpointId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<DeliveryAttemptRow[]> {
    const page: Keyset = {
      table: 'webhook_delivery_attempts',
      cursor: startingAfter,
      scope: { organization_id: organizationId, endpoint_id: endpointId },
      order: 'desc',
    };
    return this.database.rows<DeliveryAttemptRow>(
      sql`SELECT id, event_id, event_type, attempt, status, response_status, error, duration_ms,
                 created_at, next_attempt_at
            FROM webhook_delivery_attempts
           WHERE organization_id = ${organizationId} AND endpoint_id = ${endpointId}
             AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  /**
   * Claims up to `limit` attempts due at `now` for this instance, in one short statement (its
   * own transaction): FOR UPDATE SKIP LOCKED lets instances claim side by side without waiting or
   * taking the same row, and the lease (`locked_until`, `now` + `leaseMs`) keeps the row from
   * every other instance until the outcome is recorded, or until the lease runs out because this
   * instance died.
   */
  claimDue(
    limit: number,
    leaseMs: number,
    lockToken: string,
    now: Date,
  ): Promise<ClaimedAttempt[]> {
    return this.database.rows<ClaimedAttempt>(
      sql`WITH due AS (
            SELECT id FROM webhook_delivery_attempts
             WHERE status = 'pending' AND next_attempt_at <= ${now}
               AND (locked_until IS NULL OR locked_until <= ${now})
             ORDER BY next_attempt_at
             LIMIT ${limit}
             FOR UPDATE SKIP LOCKED),
          claimed AS (
            UPDATE webhook_delivery_attempts a
               SET locked_until = ${now}::timestamptz + ${leaseMs} * interval '1 millisecond',
                   lock_token = ${lockToken}
              FROM due WHERE a.id = due.id
            RETURNING a.id, a.lock_token, a.organization_id, a.endpoint_id, a.event_id,
                      a.event_type, a.attempt)
          SELECT c.*, e.url, e.secret, e.status AS endpoint_status, ev.data,
                 ev.created_at AS event_created_at
            FROM claimed c
            JOIN webhook_endpoints e ON e.id = c.endpoint_id AND e.organization_id = c.organization_id
            JOIN webhook_events ev ON ev.id = c.event_id AND ev.organization_id = c.organization_id`,
      { name: 'webhook_attempts_claim' },
    );
  }

  /**
   * Records outcomes in one statement: each attempt still held with its token becomes succeeded
   * or failed, and a failed one with `retryInMs` gets its next attempt, pending, due that long
   * after `now`, in the same statement. An attempt whose lease was lost (this instance was too
   * slow and another took it over) is left alone: only the holder of the current token records
   * an outcome.
   */
  async recordOutcomes(outcomes: AttemptOutcome[], now: Date): Promise<void> {
    await this.database.rows(
      sql`WITH outcome AS (
            SELECT * FROM unnest(${outcomes.map((o) => o.id)}::uuid[],
                                 ${outcomes.map((o) => o.lockToken)}::uuid[],
                                 ${outcomes.map((o) => o.status)}::text[],
                                 ${outcomes.map((o) => o.responseStatus)}::int[],
                                 ${outcomes.map((o) => o.error)}::text[],
                                 ${outcomes.map((o) => o.durationMs)}::int[],
                                 ${outcomes.map((o) => o.retryInMs)}::int[])
                     AS o(id, lock_token, status, response_status, error, duration_ms, retry_ms)),
          done AS (
            UPDATE webhook_delivery_attempts a
               SET status = o.status, response_status = o.response_status, error = o.error,
                   duration_ms = o.duration_ms,
                   -- An endpoint disabled meanwhile gets no further attempt.
                   next_attempt_at = CASE WHEN e.status = 'enabled'
                                     THEN ${now}::timestamptz + o.retry_ms * interval '1 millisecond' END,
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
      { name: 'webhook_attempts_record' },
    );
  }

  /** Gives claimed attempts back (shutdown): due again at once, for any instance. */
  async release(attempts: Array<{ id: string; lockToken: string }>): Promise<void> {
    await this.database.rows(
      sql`UPDATE webhook_delivery_attempts a SET locked_until = NULL, lock_token = NULL
            FROM unnest(${attempts.map((a) => a.id)}::uuid[],
                        ${attempts.map((a) => a.lockToken)}::uuid[]) AS r(id, lock_token)
           WHERE a.id = r.id AND a.lock_token = r.lock_token AND a.status = 'pending'`,
    );
  }

  /** Attempts not yet made (due or scheduled), database-wide; the partial due index covers it. */
  async countPending(): Promise<number> {
    const row = await this.database.row<{ pending: number }>(
      sql`SELECT count(*)::int AS pending FROM webhook_delivery_attempts WHERE status = 'pending'`,
    );
    return row!.pending;
  }

  /**
   * Deletes up to `batchSize` events created before `cutoff` whose attempts are all made (their
   * attempts go with them); answers how many. SKIP LOCKED: instances purge side by side.
   */
  async deleteEventsCreatedBefore(cutoff: Date, batchSize: number): Promise<number> {
    const row = await this.database.row<{ count: number }>(
      sql`WITH doomed AS (
            SELECT ev.id FROM webhook_events ev
             WHERE ev.created_at < ${cutoff}
               AND NOT EXISTS (SELECT 1 FROM webhook_delivery_attempts a
                                WHERE a.event_id = ev.id AND a.status = 'pending')
             LIMIT ${batchSize}
             FOR UPDATE SKIP LOCKED),
          deleted AS (DELETE FROM webhook_events WHERE id IN (SELECT id FROM doomed) RETURNING 1)
          SELECT count(*)::int AS count FROM deleted`,
    );
    return row?.count ?? 0;
  }
}
