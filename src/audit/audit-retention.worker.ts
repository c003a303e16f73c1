import { Inject, Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import type { PeriodicPurge } from '../common/time/periodic-purge';
import { type TeamsConfig, teamsConfig } from '../config/teams.config';
import { AuditRepository } from './audit.repository';

const DAY_MS = 86_400_000;

/**
 * Deletes audit events older than AUDIT_RETENTION_DAYS, on every instance (PeriodicPurge), every
 * AUDIT_PURGE_INTERVAL_MS and once shortly after start.
 */
@Injectable()
export class AuditRetentionWorker {
  private readonly purge: PeriodicPurge;

  constructor(
    events: AuditRepository,
    @Inject(teamsConfig.KEY) teams: TeamsConfig,
    logger: PinoLogger,
    clock: Clock,
    jobs: BackgroundJobs,
  ) {
    logger.setContext(AuditRetentionWorker.name);
    const retentionMs = teams.auditRetentionDays * DAY_MS;
    this.purge = jobs.purge({
      what: 'audit events past retention',
      intervalMs: teams.auditPurgeIntervalMs,
      batchSize: 1_000,
      now: () => clock.now(),
      deleteBatch: (now, batchSize) =>
        events.deleteCreatedBefore(new Date(now.getTime() - retentionMs), batchSize),
      logger,
    });
  }

  /** Deletes every event past retention now; answers how many (after a run in progress, if any). */
  purgeExpired(): Promise<number> {
    return this.purge.runNow();
  }
}
