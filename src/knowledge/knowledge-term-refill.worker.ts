import { Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import type { PeriodicTask } from '../common/time/periodic-task';
import { KnowledgeRepository } from './knowledge.repository';

/** Queued lexemes are listed again within this (a delete's word is short of chunks until then). */
const REFILL_INTERVAL_MS = 2_000;

/**
 * Lexemes per transaction at most, of one organization: each is a GIN search of its chunks
 * holding it (fewer once REFILL_TRANSACTION_MS have gone, knowledge.repository.ts).
 */
const BATCH_SIZE = 100;

/**
 * Lists the next best chunks of the lexemes a delete left short of postings
 * (knowledge_term_refills, docs/knowledge.md#search), on every instance: batches skip the rows
 * another instance holds, so instances neither wait for each other nor refill a word twice.
 */
@Injectable()
export class KnowledgeTermRefillWorker {
  private readonly task: PeriodicTask;
  /** The organization this instance refilled last: the next batch is the next organization's. */
  private lastOrganization: string | null = null;

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

  /**
   * Organization after organization, in turn from where this instance's last run stopped (the
   * one that failed included), until none has a word this instance can take: one organization's
   * many words, or one whose refill fails, holds back no other.
   */
  private async refillAll(): Promise<number> {
    let total = 0;
    while (!this.task.isStopped) {
      const organizationId = await this.repository.nextToRefill(this.lastOrganization);
      if (!organizationId) break;
      this.lastOrganization = organizationId;
      const refilled = await this.repository.refillPostings(organizationId, BATCH_SIZE);
      total += refilled;
      if (refilled === 0) break;
    }
    return total;
  }
}
