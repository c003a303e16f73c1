import { Inject, Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { ErasureParticipants } from '../common/erasure/erasure-participants';
import { Clock } from '../common/time/clock';
import { BackgroundJobs } from '../common/time/background-jobs';
import type { PeriodicTask } from '../common/time/periodic-task';
import { type EndUsersConfig, endUsersConfig } from '../config/end-users.config';
import { DEADLOCK_ATTEMPTS, Database } from '../database/database';
import { MetricsService } from '../metrics/metrics.service';
import { EndUsersRepository } from './end-users.repository';

/** End users erased per transaction; the worker loops until none are due. */
const BATCH_SIZE = 20;

/**
 * Rows the erasures in parts (ErasureParticipants.inParts: memories) delete per transaction,
 * before the transaction that erases the rest.
 */
export const ERASED_ROWS_PER_TRANSACTION = 5_000;

/** What one transaction did: end users erased, or only some of their rows (to be continued). */
interface BatchOutcome {
  erased: number;
  unfinished: boolean;
}

/**
 * Erases end users whose grace period is over. The schedule is the end_users row itself, so a
 * restart loses nothing; each batch is claimed with FOR UPDATE SKIP LOCKED inside the deleting
 * transaction, so two instances never erase the same user and a crash mid-way rolls back and is
 * redone by the next poll. What is erased is up to the ErasureParticipants that modules register
 * (docs/data-plane.md); this worker names none of them.
 */
@Injectable()
export class ErasureWorker {
  private readonly task: PeriodicTask;
  /** The organization the last batch ended with: the next claim starts after it (claimDue). */
  private lastOrganization: string | null = null;

  constructor(
    private readonly database: Database,
    @Inject(endUsersConfig.KEY) settings: EndUsersConfig,
    private readonly endUsers: EndUsersRepository,
    private readonly participants: ErasureParticipants,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    metrics: MetricsService,
    jobs: BackgroundJobs,
  ) {
    this.logger.setContext(ErasureWorker.name);
    this.task = jobs.periodic({
      intervalMs: settings.erasurePollIntervalMs,
      run: async () => {
        const count = await this.eraseAll();
        if (count > 0) this.logger.info({ count }, 'erased end users');
      },
      onError: (error) => this.logger.error({ err: error }, 'erasure failed; retrying'),
    });
    const countPending = () =>
      this.endUsers.countDeleting().catch((error: unknown) => {
        this.logger.warn({ err: error }, 'erasure_pending: count failed');
        return undefined;
      });
    metrics.gauge({
      name: 'erasure_pending',
      help: 'End users in state deleting (grace period running or erasure due); database-wide',
      async collect() {
        // A failed count leaves the last value rather than failing the whole scrape.
        const pending = await countPending();
        if (pending !== undefined) this.set(pending);
      },
    });
  }

  /**
   * Erases every end user now due; answers how many. Waits for this instance's run in
   * progress, if any, which holds the rows it is working on.
   */
  eraseDue(): Promise<number> {
    return this.task.exclusive(() => this.eraseAll());
  }

  private async eraseAll(): Promise<number> {
    let erased = 0;
    for (;;) {
      const step = await this.eraseBatch();
      erased += step.erased;
      if ((!step.unfinished && step.erased < BATCH_SIZE) || this.task.isStopped) return erased;
    }
  }

  /**
   * One transaction on the claimed users. First the erasures in parts, ERASED_ROWS_PER_TRANSACTION
   * rows in all: while they take that many, the transaction ends there and the users are claimed
   * again (after other organizations' due users, see claimDue), so an end user holding a million
   * memories is erased in many short transactions, not one that holds back vacuum and every
   * erasure behind it. Then everything else about them, or nothing. No request waits for it, so
   * DATABASE_STATEMENT_TIMEOUT_MS does not apply.
   */
  private eraseBatch(): Promise<BatchOutcome> {
    // Read once: a transaction run again after a deadlock claims from the same place.
    const after = this.lastOrganization;
    return this.database.transaction(
      async (manager) => {
        const due = await this.endUsers.claimDue(manager, this.clock.now(), BATCH_SIZE, after);
        if (due.length === 0) return { erased: 0, unfinished: false };
        this.lastOrganization = due[due.length - 1].organization_id;
        const endUsers = due.map((row) => ({
          id: row.id,
          organizationId: row.organization_id,
          userId: row.user_id,
        }));
        let rows = ERASED_ROWS_PER_TRANSACTION;
        for (const part of this.participants.inParts) {
          rows -= await part.erase(manager, endUsers, rows);
          if (rows <= 0) return { erased: 0, unfinished: true };
        }
        for (const participant of this.participants.inOrder) {
          await participant.erase(manager, endUsers);
        }
        return { erased: endUsers.length, unfinished: false };
      },
      // A reply storing its exchange locks in the other order (docs/database.md): run again.
      { statementTimeoutMs: 0, deadlockAttempts: DEADLOCK_ATTEMPTS },
    );
  }
}
