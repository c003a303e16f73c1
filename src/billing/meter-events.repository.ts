import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import { Columns, type RowOf } from '../database/columns';
import { sql } from '../database/sql';
import type { MeterEvent } from './entities/meter-event.entity';

/** A claimed meter event, with what sending it takes. */
const CLAIMED = Columns.rowOf<MeterEvent>('m')(
  'id',
  'eventName',
  'identifier',
  'stripeCustomerId',
  'value',
  'occurredAt',
  'attempts',
  'lockToken',
);

export type ClaimedMeterEvent = RowOf<typeof CLAIMED>;

const PENDING_COUNT = Columns.computed<{ pending: number }>({ pending: sql`count(*)::int` });

/** How many token hours a run sealed. */
const SEALED_COUNT = Columns.computed<{ sealed: number }>({
  sealed: sql`greatest((SELECT count(*)::int FROM sealed), (SELECT count(*)::int FROM late))`,
});

/** Stripe refuses meter events older than 35 days: past this they are marked expired. */
export const METER_EVENT_MAX_AGE_MS = 35 * 86_400_000 - 3_600_000;

/**
 * The SQL of the meter events outbox (meter_events) and of the token hours it is fed from
 * (meter_token_hours). Times that decide (due, leased, over) are the caller's Clock's.
 */
@Injectable()
export class MeterEventsRepository {
  constructor(private readonly database: Database) {}

  /**
   * Claims up to `limit` due events for this instance: FOR UPDATE SKIP LOCKED and a lease, so
   * instances claim side by side and each attempt is made by one of them; an instance that dies
   * leaves a lease that runs out.
   */
  claimDue(
    limit: number,
    leaseMs: number,
    lockToken: string,
    now: Date,
  ): Promise<ClaimedMeterEvent[]> {
    return this.database.rows(
      CLAIMED.query`WITH due AS (
            SELECT id FROM meter_events
             WHERE status = 'pending' AND next_attempt_at <= ${now}
               AND (locked_until IS NULL OR locked_until <= ${now})
             ORDER BY next_attempt_at
             LIMIT ${limit}
             FOR UPDATE SKIP LOCKED)
          UPDATE meter_events m
             SET locked_until = ${now}::timestamptz + ${leaseMs} * interval '1 millisecond',
                 lock_token = ${lockToken}, attempts = m.attempts + 1
            FROM due WHERE m.id = due.id
          RETURNING ${CLAIMED}`,
      { prepared: true },
    );
  }

  /** Stripe took it: never sent again. Only the holder of the claim records it. */
  async delivered(id: string, lockToken: string, now: Date): Promise<void> {
    await this.database.count(
      sql`UPDATE meter_events
             SET status = 'delivered', delivered_at = ${now}, last_error = NULL,
                 locked_until = NULL, lock_token = NULL
           WHERE id = ${id} AND lock_token = ${lockToken}`,
      { prepared: true },
    );
  }

  /** Due again at `retryAt`, or expired (`expired`: too old for Stripe to take). */
  async failed(
    id: string,
    lockToken: string,
    error: string,
    retryAt: Date,
    expired: boolean,
  ): Promise<void> {
    await this.database.count(
      sql`UPDATE meter_events
             SET status = CASE WHEN ${expired}::boolean THEN 'expired' ELSE 'pending' END,
                 next_attempt_at = ${retryAt}, last_error = ${error.slice(0, 500)},
                 locked_until = NULL, lock_token = NULL
           WHERE id = ${id} AND lock_token = ${lockToken}`,
      { prepared: true },
    );
  }

  /**
   * Turns every token hour that ended before `before` into one meter event of its
   * organization's Stripe customer (none without one) and marks it sealed, and the late tokens
   * of hours sealed before (MeterTokenHour.lateTokens) into one more event each, in one
   * statement; SKIP LOCKED lets instances seal side by side. Answers the larger of how many hours
   * were sealed and how many sent late tokens (a full batch means more may be waiting), not how many events
   * were queued: an hour of an organization without a customer, or of no tokens, is sealed with
   * no event. A late event's identifier is its hour's with `:late:<n>`, n counting the hour's
   * late events from 1.
   */
  async sealHoursBefore(
    before: Date,
    eventName: string,
    now: Date,
    batch: number,
  ): Promise<number> {
    const row = await this.database.row(
      SEALED_COUNT.query`WITH open_hours AS (
            SELECT organization_id, hour FROM meter_token_hours
             WHERE NOT sealed AND hour < ${before}
             ORDER BY hour
             LIMIT ${batch}
             FOR UPDATE SKIP LOCKED),
          sealed AS (
            UPDATE meter_token_hours h SET sealed = true
              FROM open_hours o WHERE h.organization_id = o.organization_id AND h.hour = o.hour
            RETURNING h.organization_id, h.hour, h.tokens, ''::text AS suffix),
          late_hours AS (
            SELECT organization_id, hour, late_tokens FROM meter_token_hours
             WHERE late_tokens > 0 AND sealed
             ORDER BY hour
             LIMIT ${batch}
             FOR UPDATE SKIP LOCKED),
          late AS (
            UPDATE meter_token_hours h
               SET tokens = h.tokens + l.late_tokens, late_tokens = 0,
                   late_sends = h.late_sends + 1
              FROM late_hours l WHERE h.organization_id = l.organization_id AND h.hour = l.hour
            RETURNING h.organization_id, h.hour, l.late_tokens AS tokens,
                      ':late:' || h.late_sends AS suffix),
          queued AS (
            INSERT INTO meter_events (organization_id, kind, event_name, identifier,
                                      stripe_customer_id, value, occurred_at, month,
                                      next_attempt_at)
            SELECT s.organization_id, 'tokens', ${eventName},
                   encode(sha256(convert_to(s.organization_id::text || ':tokens:'
                                            || to_char(s.hour AT TIME ZONE 'UTC',
                                                       'YYYY-MM-DD"T"HH24') || s.suffix,
                                            'UTF8')), 'hex'),
                   c.stripe_customer_id, s.tokens, s.hour,
                   date_trunc('month', s.hour AT TIME ZONE 'UTC')::date, ${now}::timestamptz
              FROM (SELECT * FROM sealed UNION ALL SELECT * FROM late) s
              JOIN billing_customers c ON c.organization_id = s.organization_id
             WHERE s.tokens > 0
            ON CONFLICT (identifier) DO NOTHING
            RETURNING 1)
          SELECT ${SEALED_COUNT}`,
    );
    return row?.sealed ?? 0;
  }

  /** The organization's events of the month not at Stripe yet. */
  async countPending(organizationId: string, monthStart: string): Promise<number> {
    const row = await this.database.row(
      PENDING_COUNT.query`SELECT ${PENDING_COUNT} FROM meter_events
           WHERE organization_id = ${organizationId} AND month = ${monthStart}
             AND status = 'pending'`,
    );
    return row!.pending;
  }

  /** Events not at Stripe yet, database-wide (the meter_events_pending gauge). */
  async countAllPending(): Promise<number> {
    const row = await this.database.row(
      PENDING_COUNT.query`SELECT ${PENDING_COUNT} FROM meter_events WHERE status = 'pending'`,
    );
    return row!.pending;
  }

  /** Deletes up to `batch` events delivered or expired before `cutoff`; answers how many. */
  async deleteDoneBefore(cutoff: Date, batch: number): Promise<number> {
    return this.database.count(
      sql`DELETE FROM meter_events WHERE id IN (
            SELECT id FROM meter_events
             WHERE status <> 'pending' AND occurred_at < ${cutoff}
             LIMIT ${batch} FOR UPDATE SKIP LOCKED)`,
    );
  }
}
