import { Injectable } from '@nestjs/common';
import { Columns } from '../database/columns';
import { Database } from '../database/database';
import { sql } from '../database/sql';

/** The budgets one reply is checked against; a null limit is no budget. */
export interface ReservationRequest {
  organizationId: string;
  endUserId: string;
  /** `month:<first day>` and its first day, YYYY-MM-DD. */
  month: { budget: string; start: string; limit: number | null };
  /** `day:<day>:<end user id>` and the day, YYYY-MM-DD. */
  day: { budget: string; day: string; limit: number | null };
  reservationId: string;
  /** 0: checked, nothing held (the local engine spends nothing). */
  tokens: number;
  /** The Clock's time, and when the reservation lapses if its reply never settles it. */
  now: Date;
  expiresAt: Date;
}

/** What spend_reserve() answers: the scope that refused (null: admitted) and its count (bigint). */
const RESERVATION = Columns.computed<{ refused_scope: string | null; counted: string | null }>({
  refused_scope: sql`refused_scope`,
  counted: sql`counted`,
});

/** Null when admitted; else the budget that refused and its spent + reserved tokens. */
export type ReservationRefusal = { scope: 'organization' | 'end_user'; counted: number } | null;

/**
 * The SQL of spend_reservations: tokens held back from a budget by replies in flight (contract
 * §23, §29; docs/spend-control.md). They live in PostgreSQL, which every instance of a
 * deployment shares and no reply can go without: a budget is then one store, never two views
 * of it, whether Redis is there, slow or gone.
 *
 * Reservations commit asynchronously (`asyncCommit`): visible to every session at once, only
 * their durability is deferred, and a crash of PostgreSQL loses the replies they stand for too.
 * It keeps a WAL flush out of the time the budget's lock is held.
 */
@Injectable()
export class SpendReservationsRepository {
  constructor(private readonly database: Database) {}

  /**
   * Checks the reply's budgets (spent + reserved < limit, month first) and, when each has room,
   * reserves `tokens` in each: `spend_reserve()` (migration ReserveSpendInPostgres), one round
   * trip, under a lock per budget so that concurrent reservations of a budget see each other.
   */
  async reserve(request: ReservationRequest): Promise<ReservationRefusal> {
    const { month, day } = request;
    const row = await this.database.row(
      RESERVATION.query`SELECT ${RESERVATION} FROM spend_reserve(
            ${request.organizationId}::uuid,
            ${month.budget}::text, ${month.start}::date, ${month.limit}::bigint,
            ${request.endUserId}::uuid, ${day.budget}::text, ${day.day}::date, ${day.limit}::bigint,
            ${request.reservationId}::uuid, ${request.tokens}::integer,
            ${request.now}::timestamptz, ${request.expiresAt}::timestamptz)`,
      { prepared: true, asyncCommit: true },
    );
    if (!row?.refused_scope) return null;
    return {
      scope: row.refused_scope === 'end_user' ? 'end_user' : 'organization',
      counted: Number(row.counted),
    };
  }

  /** Gives reservations back: their reply failed or was cancelled, and spent nothing. */
  async release(
    organizationId: string,
    budgets: string[],
    reservationIds: string[],
  ): Promise<void> {
    await this.database.count(
      sql`DELETE FROM spend_reservations
           WHERE organization_id = ${organizationId}::uuid AND budget = ANY(${budgets}::text[])
             AND reservation_id = ANY(${reservationIds}::uuid[])`,
      { prepared: true, asyncCommit: true },
    );
  }

  /**
   * Up to `batchSize` reservations whose reply never settled them (its instance died): they no
   * longer count. Skips rows another instance or a settling reply holds; answers how many.
   */
  deleteExpired(now: Date, batchSize: number): Promise<number> {
    return this.database.count(
      sql`WITH doomed AS (
            SELECT ctid FROM spend_reservations WHERE expires_at <= ${now}::timestamptz
             LIMIT ${batchSize} FOR UPDATE SKIP LOCKED)
          DELETE FROM spend_reservations WHERE ctid IN (SELECT ctid FROM doomed)`,
    );
  }
}
