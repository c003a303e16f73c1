import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Logger } from 'pino';
import { DataSource, EntityManager } from 'typeorm';
import { ROOT_LOGGER } from '../common/logging/root-logger';

/** Contract §6, "15/24h": the 15th failure within a rolling 24 hours locks for 24 hours. */
export const LOCKOUT_THRESHOLD = 15;
export const FAILURE_WINDOW_SECONDS = 24 * 3600;
export const LOCK_DURATION_SECONDS = 24 * 3600;
const PRUNE_INTERVAL_MS = 3600_000;

export interface AttemptGate {
  /** The address was locked before this attempt: answer 423 without checking the password. */
  refused: boolean;
}

/**
 * Failed password logins per normalised e-mail address (lower(trim(email))), known or not.
 *
 * An attempt is counted as a failure *before* the password is checked, in one atomic
 * `INSERT … ON CONFLICT DO UPDATE`: concurrent attempts serialise on the row, so of 30
 * simultaneous wrong logins exactly 15 are let through to a 401 (the 15th sets the lock) and the
 * rest answer 423. A successful login then deletes the row, which is "clears the count".
 */
@Injectable()
export class LoginAttemptsService implements OnModuleInit, OnModuleDestroy {
  private pruneTimer?: NodeJS.Timeout;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(ROOT_LOGGER) private readonly logger: Logger,
  ) {}

  onModuleInit(): void {
    this.pruneTimer = setInterval(() => void this.prune(), PRUNE_INTERVAL_MS);
    this.pruneTimer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.pruneTimer);
  }

  /**
   * Counts this attempt for `email` unless the address is locked. `refused_while_locked` tells a
   * refused attempt from the one that has just set the lock (which still answers 401).
   */
  async begin(email: string): Promise<AttemptGate> {
    const rows: Array<{ refused: boolean }> = await this.dataSource.query(
      `INSERT INTO login_attempts AS a (email, failures, locked_at, updated_at)
       VALUES (lower($1), ARRAY[now()], CASE WHEN $2 <= 1 THEN now() END, now())
       ON CONFLICT (email) DO UPDATE SET
         failures = CASE
           WHEN a.locked_at > now() - make_interval(secs => $4) THEN a.failures
           ELSE ARRAY(SELECT f FROM unnest(a.failures) f
                       WHERE f > now() - make_interval(secs => $3) ORDER BY f) || now()
         END,
         locked_at = CASE
           WHEN a.locked_at > now() - make_interval(secs => $4) THEN a.locked_at
           WHEN (SELECT count(*) FROM unnest(a.failures) f
                  WHERE f > now() - make_interval(secs => $3)) + 1 >= $2 THEN now()
         END,
         refused_while_locked = CASE
           WHEN a.locked_at > now() - make_interval(secs => $4) THEN a.refused_while_locked + 1
           ELSE 0
         END,
         updated_at = now()
       RETURNING refused_while_locked > 0 AS refused`,
      [email, LOCKOUT_THRESHOLD, FAILURE_WINDOW_SECONDS, LOCK_DURATION_SECONDS],
    );
    return { refused: rows[0].refused };
  }

  /** A successful password login clears the failure count (and any lock it raced with). */
  async succeeded(email: string): Promise<void> {
    await this.dataSource.query('DELETE FROM login_attempts WHERE email = lower($1)', [email]);
  }

  /** A successful password reset lifts the lock and clears the count, in the reset's transaction. */
  async clear(manager: EntityManager, email: string): Promise<void> {
    await manager.query('DELETE FROM login_attempts WHERE email = lower($1)', [email]);
  }

  /**
   * Rows untouched for a whole window hold neither a live failure nor a live lock (both are at
   * most as recent as updated_at), so they can go: attackers' made-up addresses do not pile up.
   */
  private async prune(): Promise<void> {
    try {
      await this.dataSource.query(
        `DELETE FROM login_attempts
          WHERE updated_at < now() - make_interval(secs => greatest($1, $2))`,
        [FAILURE_WINDOW_SECONDS, LOCK_DURATION_SECONDS],
      );
    } catch (error) {
      this.logger.warn({ err: error }, 'pruning login_attempts failed');
    }
  }
}
