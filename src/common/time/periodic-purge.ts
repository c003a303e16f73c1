import type { PinoLogger } from 'nestjs-pino';
import type { BackgroundJobs } from './background-jobs';
import { inBatches, type PeriodicTask } from './periodic-task';

/** A batch that deleted fewer rows than asked though more were due (it bounds its work otherwise). */
export interface PurgedBatch {
  deleted: number;
  /** More rows were due past this batch: the run goes on. */
  more: boolean;
}

export interface PeriodicPurgeOptions {
  /** What is deleted, for the logs: "audit events past retention". */
  what: string;
  /** The pause between runs; the first comes 10 s after start (or sooner, if this is shorter). */
  intervalMs: number;
  /** Rows per statement; a run loops until a batch comes back short. */
  batchSize: number;
  /** The time a run deletes as of, read once per run (the Clock). */
  now: () => Date;
  /**
   * Deletes up to `batchSize` rows due as of `now` in one bounded statement that skips rows
   * another instance holds (`FOR UPDATE SKIP LOCKED`); answers how many (a full batch: more may
   * be due), or a PurgedBatch saying so itself.
   */
  deleteBatch: (now: Date, batchSize: number) => Promise<number | PurgedBatch>;
  logger: PinoLogger;
}

/**
 * A retention purge run by every instance: batches that skip what another instance is deleting,
 * so instances purging at once neither block each other nor do the same work twice, and there is
 * no leader to elect. Workers get theirs from BackgroundJobs.purge(), which starts and stops it
 * with the application.
 */
export class PeriodicPurge {
  private readonly task: PeriodicTask;

  constructor(
    jobs: BackgroundJobs,
    private readonly options: PeriodicPurgeOptions,
  ) {
    const { what, logger } = options;
    this.task = jobs.periodic({
      intervalMs: options.intervalMs,
      firstDelayMs: Math.min(options.intervalMs, 10_000),
      run: async () => {
        const count = await this.purgeAll();
        if (count > 0) logger.info({ count }, `purged ${what}`);
      },
      onError: (error) => logger.error({ err: error }, `purging ${what} failed`),
    });
  }

  /**
   * Deletes everything due now; answers how many. Waits for this instance's run in progress, if
   * any, which holds the rows it is working on.
   */
  runNow(): Promise<number> {
    return this.task.exclusive(() => this.purgeAll());
  }

  private async purgeAll(): Promise<number> {
    const { batchSize, deleteBatch } = this.options;
    const now = this.options.now();
    let deleted = 0;
    await inBatches(
      batchSize,
      async () => {
        const batch = await deleteBatch(now, batchSize);
        if (typeof batch === 'number') {
          deleted += batch;
          return batch;
        }
        deleted += batch.deleted;
        return batch.more ? batchSize : 0;
      },
      () => this.task.isStopped,
    );
    return deleted;
  }
}
