import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import type { PeriodicPurge } from '../common/time/periodic-purge';
import { memoryConfig } from '../config/memory.config';
import { MemoriesRepository } from './memories.repository';

/**
 * Deletes the memories older than their organization's `memory_retention_days`, on every
 * instance (PeriodicPurge), every MEMORY_PURGE_INTERVAL_MS and once shortly after start. Facts
 * stay; a learned fact loses the link to its message.
 */
@Injectable()
export class MemoryRetentionWorker {
  private readonly purge: PeriodicPurge;
  /** The organization the last batch ended in, on this instance. */
  private endedIn: string | null = null;

  constructor(
    memories: MemoriesRepository,
    clock: Clock,
    logger: PinoLogger,
    @Inject(memoryConfig.KEY) memory: ConfigType<typeof memoryConfig>,
    jobs: BackgroundJobs,
  ) {
    logger.setContext(MemoryRetentionWorker.name);
    this.purge = jobs.purge({
      what: 'memories past retention',
      intervalMs: memory.purgeIntervalMs,
      batchSize: 1_000,
      now: () => clock.now(),
      // Each batch begins after the organization the last one ended in: one organization's
      // backlog is taken a batch at a time, in turn with the others'.
      deleteBatch: async (now, batchSize) => {
        const batch = await memories.deletePastRetention(now, batchSize, this.endedIn);
        this.endedIn = batch.endedIn ?? this.endedIn;
        return batch;
      },
      logger,
    });
  }

  /**
   * Deletes every memory past its organization's retention now; answers how many (after a run
   * in progress, if any).
   */
  purgeExpired(): Promise<number> {
    return this.purge.runNow();
  }
}
