import { Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import { inBatches, type PeriodicTask } from '../common/time/periodic-task';
import { KnowledgeRepository } from './knowledge.repository';

/** Queued lexemes are listed again within this (a delete's word is short of chunks until then). */
const REFILL_INTERVAL_MS = 2_000;

/** Lexemes per transaction: each is a GIN search of the organization's chunks holding it. */
const BATCH_SIZE = 100;

/**
 * Lists the next best chunks of the lexemes a delete left short of postings
 * (knowledge_term_refills, docs/knowledge.md#search), on every instance: batches skip the rows
 * another instance holds, so instances neither wait for each other nor refill a word twice.
 */
@Injectable()
export class KnowledgeTermRefillWorker {
  private readonly task: PeriodicTask;

  constructor(
    private readonly repository: KnowledgeRepository,
    logger: PinoLogger,
    jobs: BackgroundJobs,
  ) {
    logger.setContext(KnowledgeTermRefillWorker.name);
    this.task = jobs.periodic({
      intervalMs: REFILL_INTERVAL_MS,
      run: async () => {
        const count = await this.refillAll();
        if (count > 0) logger.debug({ count }, 'refilled knowledge postings');
      },
      onError: (error) => logger.error({ err: error }, 'refilling knowledge postings failed'),
    });
  }

  /** Refills every queued lexeme now; answers how many (after a run in progress, if any). */
  refillNow(): Promise<number> {
    return this.task.exclusive(() => this.refillAll());
  }

  private refillAll(): Promise<number> {
    return inBatches(
      BATCH_SIZE,
      () => this.repository.refillPostings(BATCH_SIZE),
      () => this.task.isStopped,
    );
  }
}
