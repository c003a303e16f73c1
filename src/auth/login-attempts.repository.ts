import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';

export interface LockoutPolicy {
  threshold: number;
  windowSeconds: number;
  lockSeconds: number;
}

/**
 * The SQL of login_attempts: one row per normalised address (lower(email)). Times come from the
 * caller (the injected Clock), never from the database's now(), so a spec can move them.
 */
@Injectable()
export class LoginAttemptsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Counts a failure at `at` unless the address is locked, in one atomic
   * `INSERT … ON CONFLICT DO UPDATE` (concurrent attempts serialise on the row): failures older
   * than the window drop out, the `threshold`-th within it sets the lock, and an attempt while
   * locked only raises `refused_while_locked`. Answers whether this attempt was refused.
   */
  async countAttempt(email: string, at: Date, policy: LockoutPolicy): Promise<boolean> {
    const rows: Array<{ refused: boolean }> = await this.dataSource.query(
      `INSERT INTO login_attempts AS a (email, failures, locked_at, updated_at)
       VALUES (lower($1), ARRAY[$5::timestamptz], CASE WHEN $2 <= 1 THEN $5::timestamptz END, $5)
       ON CONFLICT (email) DO UPDATE SET
         failures = CASE
           WHEN a.locked_at > $5::timestamptz - make_interval(secs => $4) THEN a.failures
           ELSE ARRAY(SELECT f FROM unnest(a.failures) f
                       WHERE f > $5::timestamptz - make_interval(secs => $3) ORDER BY f)
                || $5::timestamptz
         END,
         locked_at = CASE
           WHEN a.locked_at > $5::timestamptz - make_interval(secs => $4) THEN a.locked_at
           WHEN (SELECT count(*) FROM unnest(a.failures) f
                  WHERE f > $5::timestamptz - make_interval(secs => $3)) + 1 >= $2
             THEN $5::timestamptz
         END,
         refused_while_locked = CASE
           WHEN a.locked_at > $5::timestamptz - make_interval(secs => $4)
             THEN a.refused_while_locked + 1
           ELSE 0
         END,
         updated_at = $5
       RETURNING refused_while_locked > 0 AS refused`,
      [email, policy.threshold, policy.windowSeconds, policy.lockSeconds, at],
    );
    return rows[0].refused;
  }

  /** Forgets the address's failures and lock. */
  clear(email: string): Promise<void> {
    return this.clearInTransaction(this.dataSource.manager, email);
  }

  /** Forgets the address's failures and lock, inside the caller's transaction. */
  async clearInTransaction(manager: EntityManager, email: string): Promise<void> {
    await manager.query('DELETE FROM login_attempts WHERE email = lower($1)', [email]);
  }

  /** Drops the rows untouched since `before`. */
  async deleteUntouchedSince(before: Date): Promise<void> {
    await this.dataSource.query('DELETE FROM login_attempts WHERE updated_at < $1', [before]);
  }
}
