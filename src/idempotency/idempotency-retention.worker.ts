import { Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import type { PeriodicPurge } from '../common/time/periodic-purge';
import { IdempotencyRepository } from './idempotency.repository';
import { IDEMPOTENCY_RETENTION_MS } from './idempotency.service';

/** Keys live 24 hours; an hourly purge keeps at most an hour's worth of expired ones. */
const PURGE_INTERVAL_MS = 60 * 60 * 1000;

/**
 * Deletes idempotency keys older than 24 hours (by the Clock), on every instance
 * (PeriodicPurge), every hour and once shortly after start. An expired key not yet purged is
 * already ignored by the claim and the lookup, so the purge only reclaims space.
 */
@Injectable()
export class IdempotencyRetentionWorker {
  private readonly purge: PeriodicPurge;

  constructor(keys: IdempotencyRepository, clock: Clock, logger: PinoLogger, jobs: BackgroundJobs) {
    logger.setContext(IdempotencyRetentionWorker.name);
    this.purge = jobs.purge({
      what: 'idempotency keys past retention',
      intervalMs: PURGE_INTERVAL_MS,
      batchSize: 1_000,
      now: () => clock.now(),
      deleteBatch: (now, batchSize) => keys.deleteExpired(now, IDEMPOTENCY_RETENTION_MS, batchSize),
      logger,
    });
  }

  /** Deletes every key past retention now; answers how many (after a run in progress, if any). */
  purgeExpired(): Promise<number> {
    return this.purge.runNow();
  }
}
