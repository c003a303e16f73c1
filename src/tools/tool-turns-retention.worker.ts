import { Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import type { PeriodicPurge } from '../common/time/periodic-purge';
import { ToolTurnsRepository } from './tool-turns.repository';

/** Turns live TOOL_TURN_TTL_SECONDS (default 10 minutes); expired ones go within 5 more. */
const PURGE_INTERVAL_MS = 5 * 60_000;

/**
 * Deletes paused turns past their expiry (by the Clock), on every instance (PeriodicPurge), every
 * 5 minutes and once shortly after start. A turn holds the end user's message and the tool calls
 * so far, so it is not kept once nobody can resume it, whether or not another turn is ever
 * paused. An expired pending turn answers 404 whether or not it is purged yet; an expired turn
 * still being resumed is deleted too (as the purge on save did before): its reply is stored all
 * the same, and a failed resumption of it could not be retried anyway.
 */
@Injectable()
export class ToolTurnsRetentionWorker {
  private readonly purge: PeriodicPurge;

  constructor(turns: ToolTurnsRepository, clock: Clock, logger: PinoLogger, jobs: BackgroundJobs) {
    logger.setContext(ToolTurnsRetentionWorker.name);
    this.purge = jobs.purge({
      what: 'expired paused turns',
      intervalMs: PURGE_INTERVAL_MS,
      batchSize: 1_000,
      now: () => clock.now(),
      deleteBatch: (now, batchSize) => turns.deleteExpired(now, batchSize),
      logger,
    });
  }

  /** Deletes every expired turn now; answers how many (after a run in progress, if any). */
  purgeExpired(): Promise<number> {
    return this.purge.runNow();
  }
}
