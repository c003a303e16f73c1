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
      deleteBatch: (now, batchSize) => memories.deletePastRetention(now, batchSize),
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
