import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import { inBatches, type PeriodicTask } from '../common/time/periodic-task';
import { memoryConfig } from '../config/memory.config';
import { MemoriesRepository } from './memories.repository';

/** Memories deleted per statement; the worker loops until none are due. */
const BATCH_SIZE = 1_000;

/**
 * Deletes the memories older than their organization's `memory_retention_days`, on every
 * instance, every MEMORY_PURGE_INTERVAL_MS (and once shortly after start). Each batch is a
 * bounded DELETE that skips rows another instance is deleting, so any number of instances purge
 * side by side with no leader. Facts stay; a learned fact loses the link to its message.
 */
@Injectable()
export class MemoryRetentionWorker {
  private readonly task: PeriodicTask;

  constructor(
    private readonly memories: MemoriesRepository,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    @Inject(memoryConfig.KEY) memory: ConfigType<typeof memoryConfig>,
    jobs: BackgroundJobs,
  ) {
    this.logger.setContext(MemoryRetentionWorker.name);
    this.task = jobs.periodic({
      intervalMs: memory.purgeIntervalMs,
      firstDelayMs: Math.min(memory.purgeIntervalMs, 10_000),
      run: async () => {
        const count = await this.purgeAll();
        if (count > 0) this.logger.info({ count }, 'purged memories past retention');
      },
      onError: (error) => this.logger.error({ err: error }, 'memory purge failed'),
    });
  }

  /**
   * Deletes every memory past its organization's retention now; answers how many. Waits for
   * this instance's run in progress, if any, which holds the rows it is working on.
   */
  purgeExpired(): Promise<number> {
    return this.task.exclusive(() => this.purgeAll());
  }

  private purgeAll(): Promise<number> {
    return inBatches(
      BATCH_SIZE,
      () => this.memories.deletePastRetention(this.clock.now(), BATCH_SIZE),
      () => this.task.isStopped,
    );
  }
}
