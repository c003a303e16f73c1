import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import { inBatches, type PeriodicTask } from '../common/time/periodic-task';
import { memoryConfig } from '../config/memory.config';
import { MemoriesRepository } from './memories.repository';

/** Waiting rows a statement takes: each word is read to its end, so statements stay short. */
const BATCH_SIZE = 100;

/**
 * Trims the postings the trigger could not (docs/memory.md, "The postings"): the words written
 * down in memory_terms_to_trim when one end user's replies were written at once. On every
 * instance, every MEMORY_POSTINGS_TRIM_INTERVAL_MS (1 s: a word waits that long and a run past
 * its 64, while one end user's replies at once, bench long-history's 32, add a few hundred
 * postings to it; a run that finds nothing reads the queue's index, its dead entries until
 * VACUUM included); rows another instance holds are skipped.
 */
@Injectable()
export class PostingsTrimWorker {
  private readonly task: PeriodicTask;

  constructor(
    private readonly memories: MemoriesRepository,
    logger: PinoLogger,
    @Inject(memoryConfig.KEY) memory: ConfigType<typeof memoryConfig>,
    jobs: BackgroundJobs,
  ) {
    logger.setContext(PostingsTrimWorker.name);
    this.task = jobs.periodic({
      intervalMs: memory.postingsTrimIntervalMs,
      run: async () => {
        const rows = await this.trimAll();
        // Debug: under one end user's replies at once, a run every second finds words.
        if (rows > 0) logger.debug({ rows }, 'let go of words whose postings are trimmed');
      },
      onError: (error) => logger.error({ err: error }, 'trimming postings failed'),
    });
  }

  /**
   * Trims the waiting words now, after a run in progress; answers how many rows it let go (a word
   * that had postings past its 64 waits for one more look, the next run's).
   */
  trimNow(): Promise<number> {
    return this.task.exclusive(() => this.trimAll());
  }

  private trimAll(): Promise<number> {
    return inBatches(
      BATCH_SIZE,
      () => this.memories.trimWaitingPostings(BATCH_SIZE),
      () => this.task.isStopped,
    );
  }
}
