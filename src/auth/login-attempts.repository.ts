import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { Columns } from '../database/columns';
import { type Sql, sql } from '../database/sql';

export interface LockoutPolicy {
  threshold: number;
  windowSeconds: number;
  lockSeconds: number;
}

/** Whether the attempt made at `now` was refused, and whether it is the one that set the lock. */
const attemptOutcome = (now: Sql) =>
  Columns.computed<{ refused: boolean; locked_now: boolean }>({
    refused: sql`refused_while_locked > 0`,
    locked_now: sql`(refused_while_locked = 0 AND locked_at = ${now})`,
  });

/**
 * The SQL of login_attempts: one row per normalised address (lower(email)). Times come from the
 * caller (the injected Clock), never from the database's now(), so a spec can move them.
 */
@Injectable()
export class LoginAttemptsRepository {
  constructor(private readonly database: Database) {}

  /**
   * Counts a failure at `at` unless the address is locked, in one atomic
   * `INSERT … ON CONFLICT DO UPDATE` (concurrent attempts serialise on the row): failures older
   * than the window drop out, the `threshold`-th within it sets the lock, and an attempt while
   * locked only raises `refused_while_locked`. Answers whether this attempt was refused, and
   * whether it is the one that set the lock (exactly one attempt per lock is).
   */
  async countAttempt(
    email: string,
    at: Date,
    policy: LockoutPolicy,
  ): Promise<{ refused: boolean; lockedNow: boolean }> {
    const now = sql`${at}::timestamptz`;
    const locked = sql`a.locked_at > ${now} - make_interval(secs => ${policy.lockSeconds})`;
    const windowStart = sql`${now} - make_interval(secs => ${policy.windowSeconds})`;
    const outcome = attemptOutcome(now);
    const row = await this.database.row(
      outcome.query`INSERT INTO login_attempts AS a (email, failures, locked_at, updated_at)
          VALUES (lower(${email}), ARRAY[${now}],
                  CASE WHEN ${policy.threshold} <= 1 THEN ${now} END, ${now})
          ON CONFLICT (email) DO UPDATE SET
            failures = CASE
              WHEN ${locked} THEN a.failures
              ELSE ARRAY(SELECT f FROM unnest(a.failures) f WHERE f > ${windowStart} ORDER BY f)
                   || ${now}
            END,
            locked_at = CASE
              WHEN ${locked} THEN a.locked_at
              WHEN (SELECT count(*) FROM unnest(a.failures) f WHERE f > ${windowStart}) + 1
                   >= ${policy.threshold}
                THEN ${now}
            END,
            refused_while_locked = CASE
              WHEN ${locked} THEN a.refused_while_locked + 1
              ELSE 0
            END,
            updated_at = ${now}
          RETURNING ${outcome}`,
    );
    return { refused: row!.refused, lockedNow: row!.locked_now };
  }

  /** Forgets the address's failures and lock; inside the caller's transaction when given one. */
  async clear(email: string, manager?: EntityManager): Promise<void> {
    await this.database.count(sql`DELETE FROM login_attempts WHERE email = lower(${email})`, {
      manager,
    });
  }

  /**
   * Drops up to `batchSize` rows untouched since `before`, skipping rows another instance (or a
   * login) holds; answers how many (PeriodicPurge loops until a batch comes back short).
   */
  deleteUntouchedSince(before: Date, batchSize: number): Promise<number> {
    return this.database.count(
      sql`WITH doomed AS (
            SELECT email FROM login_attempts WHERE updated_at < ${before} LIMIT ${batchSize}
               FOR UPDATE SKIP LOCKED)
          DELETE FROM login_attempts WHERE email IN (SELECT email FROM doomed)`,
    );
  }
}
