import { Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { EntityManager } from 'typeorm';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import type { PeriodicPurge } from '../common/time/periodic-purge';
import { type LockoutPolicy, LoginAttemptsRepository } from './login-attempts.repository';

/** Contract §6, "15/24h": the 15th failure within a rolling 24 hours locks for 24 hours. */
export const LOCKOUT_THRESHOLD = 15;
export const FAILURE_WINDOW_SECONDS = 24 * 3600;
export const LOCK_DURATION_SECONDS = 24 * 3600;
const PRUNE_INTERVAL_MS = 3600_000;
const PRUNE_BATCH_SIZE = 1_000;

const POLICY: LockoutPolicy = {
  threshold: LOCKOUT_THRESHOLD,
  windowSeconds: FAILURE_WINDOW_SECONDS,
  lockSeconds: LOCK_DURATION_SECONDS,
};

export interface AttemptGate {
  /** The address was locked before this attempt: answer 423 without checking the password. */
  refused: boolean;
  /** This attempt set the lock (the threshold-th failure): the account, if any, is told. */
  lockedNow: boolean;
}

/**
 * Failed password logins per normalised e-mail address (lower(trim(email))), known or not.
 *
 * An attempt is counted as a failure *before* the password is checked, in one atomic statement
 * (LoginAttemptsRepository.countAttempt): concurrent attempts serialise on the row, so of 30
 * simultaneous wrong logins exactly 15 are let through to a 401 (the 15th sets the lock) and the
 * rest answer 423. A successful login then deletes the row, which is "clears the count".
 */
@Injectable()
export class LoginAttemptsService {
  private readonly purge: PeriodicPurge;

  constructor(
    private readonly attempts: LoginAttemptsRepository,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    jobs: BackgroundJobs,
  ) {
    this.logger.setContext(LoginAttemptsService.name);
    const keepMs = Math.max(FAILURE_WINDOW_SECONDS, LOCK_DURATION_SECONDS) * 1000;
    this.purge = jobs.purge({
      what: 'login attempts past their window and lock',
      intervalMs: PRUNE_INTERVAL_MS,
      batchSize: PRUNE_BATCH_SIZE,
      now: () => clock.now(),
      deleteBatch: (now, batchSize) =>
        attempts.deleteUntouchedSince(new Date(now.getTime() - keepMs), batchSize),
      logger,
    });
  }

  /**
   * Counts this attempt for `email` unless the address is locked. `refused_while_locked` tells a
   * refused attempt from the one that has just set the lock (which still answers 401).
   */
  async begin(email: string): Promise<AttemptGate> {
    return this.attempts.countAttempt(email, this.clock.now(), POLICY);
  }

  /** A successful password login clears the failure count (and any lock it raced with). */
  succeeded(email: string): Promise<void> {
    return this.attempts.clear(email);
  }

  /** A successful password reset lifts the lock and clears the count, in the reset's transaction. */
  clear(manager: EntityManager, email: string): Promise<void> {
    return this.attempts.clear(email, manager);
  }

  /**
   * Deletes now the rows untouched for a whole window, which hold neither a live failure nor a
   * live lock (both are at most as recent as updated_at), so attackers' made-up addresses do not
   * pile up; answers how many. Runs hourly on every instance, in bounded batches.
   */
  prune(): Promise<number> {
    return this.purge.runNow();
  }
}
