import { Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import { inBatches, type PeriodicTask } from '../common/time/periodic-task';
import { IdempotencyRepository } from './idempotency.repository';
import { IDEMPOTENCY_RETENTION_MS } from './idempotency.service';

/** Keys deleted per statement; the worker loops until none are due. */
const BATCH_SIZE = 1_000;
/** Keys live 24 hours; an hourly purge keeps at most an hour's worth of expired ones. */
const PURGE_INTERVAL_MS = 60 * 60 * 1000;

/**
 * Deletes idempotency keys older than 24 hours (by the Clock), on every instance, every hour (and once shortly
 * after start). Each batch is a bounded DELETE that skips rows another instance is deleting, so
 * many instances purging at once neither block each other nor do the same work twice, and there
 * is no leader to elect. An expired key not yet purged is already ignored by the claim and the
 * lookup, so the purge only reclaims space.
 */
@Injectable()
export class IdempotencyRetentionWorker {
  private readonly task: PeriodicTask;

  constructor(
    private readonly keys: IdempotencyRepository,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    jobs: BackgroundJobs,
  ) {
    this.logger.setContext(IdempotencyRetentionWorker.name);
    this.task = jobs.periodic({
      intervalMs: PURGE_INTERVAL_MS,
      firstDelayMs: 10_000,
      run: async () => {
        const count = await this.purgeAll();
        if (count > 0) this.logger.info({ count }, 'purged idempotency keys past retention');
      },
      onError: (error) => this.logger.error({ err: error }, 'idempotency purge failed'),
    });
  }

  /**
   * Deletes every key past retention now; answers how many. Waits for this instance's run in
   * progress, if any, which holds the rows it is working on.
   */
  purgeExpired(): Promise<number> {
    return this.task.exclusive(() => this.purgeAll());
  }

  private purgeAll(): Promise<number> {
    const now = this.clock.now();
    return inBatches(
      BATCH_SIZE,
      () => this.keys.deleteExpired(now, IDEMPOTENCY_RETENTION_MS, BATCH_SIZE),
      () => this.task.isStopped,
    );
  }
}
