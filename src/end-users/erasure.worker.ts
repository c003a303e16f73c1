import { Inject, Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { ErasureParticipants } from '../common/erasure/erasure-participants';
import { Clock } from '../common/time/clock';
import { BackgroundJobs } from '../common/time/background-jobs';
import { inBatches, type PeriodicTask } from '../common/time/periodic-task';
import { type EndUsersConfig, endUsersConfig } from '../config/end-users.config';
import { Database } from '../database/database';
import { MetricsService } from '../metrics/metrics.service';
import { EndUsersRepository } from './end-users.repository';

/** End users erased per transaction; the worker loops until none are due. */
const BATCH_SIZE = 20;

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

  private eraseAll(): Promise<number> {
    return inBatches(
      BATCH_SIZE,
      () => this.eraseBatch(),
      () => this.task.isStopped,
    );
  }

  /**
   * One transaction: the claimed users and everything about them, or nothing. No request waits
   * for it, so DATABASE_STATEMENT_TIMEOUT_MS does not apply: an end user holding a hundred
   * thousand memories is erased, however long it takes.
   */
  private eraseBatch(): Promise<number> {
    return this.database.transaction(
      async (manager) => {
        const due = await this.endUsers.claimDue(
          manager,
          this.clock.now(),
          BATCH_SIZE,
          this.lastOrganization,
        );
        if (due.length === 0) return 0;
        this.lastOrganization = due[due.length - 1].organization_id;
        const endUsers = due.map((row) => ({
          id: row.id,
          organizationId: row.organization_id,
          userId: row.user_id,
        }));
        for (const participant of this.participants.inOrder) {
          await participant.erase(manager, endUsers);
        }
        return endUsers.length;
      },
      { statementTimeoutMs: 0 },
    );
  }
}
