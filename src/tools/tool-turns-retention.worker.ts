import { Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import { inBatches, type PeriodicTask } from '../common/time/periodic-task';
import { ToolTurnsRepository } from './tool-turns.repository';

/** Turns deleted per statement; the worker loops until none are due. */
const BATCH_SIZE = 1_000;
/** Turns live TOOL_TURN_TTL_SECONDS (default 10 minutes); expired ones go within 5 more. */
const PURGE_INTERVAL_MS = 5 * 60_000;

/**
 * Deletes paused turns past their expiry (by the Clock), on every instance, every 5 minutes and
 * once shortly after start. A turn holds the end user's message and the tool calls so far, so it
 * is not kept once nobody can resume it, whether or not another turn is ever paused. Each batch
 * skips rows another instance is deleting, so instances purging at once neither wait for each
 * other nor delete twice, and no leader is elected. An expired pending turn answers 404 whether
 * or not it is purged yet; an expired turn still being resumed is deleted too (as the purge on
 * save did before): its reply is stored all the same, and a failed resumption of it could not be
 * retried anyway.
 */
@Injectable()
export class ToolTurnsRetentionWorker {
  private readonly task: PeriodicTask;

  constructor(
    private readonly turns: ToolTurnsRepository,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    jobs: BackgroundJobs,
  ) {
    this.logger.setContext(ToolTurnsRetentionWorker.name);
    this.task = jobs.periodic({
      intervalMs: PURGE_INTERVAL_MS,
      firstDelayMs: 10_000,
      run: async () => {
        const count = await this.purgeAll();
        if (count > 0) this.logger.info({ count }, 'purged expired paused turns');
      },
      onError: (error) => this.logger.error({ err: error }, 'purging expired paused turns failed'),
    });
  }

  /** Deletes every expired turn now; answers how many (waits for a run in progress). */
  purgeExpired(): Promise<number> {
    return this.task.exclusive(() => this.purgeAll());
  }

  private purgeAll(): Promise<number> {
    const now = this.clock.now();
    return inBatches(
      BATCH_SIZE,
      () => this.turns.deleteExpired(now, BATCH_SIZE),
      () => this.task.isStopped,
    );
  }
}
