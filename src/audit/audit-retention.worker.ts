import { Inject, Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { Clock } from '../common/time/clock';
import { BackgroundJobs } from '../common/time/background-jobs';
import { inBatches, type PeriodicTask } from '../common/time/periodic-task';
import { type TeamsConfig, teamsConfig } from '../config/teams.config';
import { AuditRepository } from './audit.repository';

/** Events deleted per statement; the worker loops until none are due. */
const BATCH_SIZE = 1_000;
const DAY_MS = 86_400_000;

/**
 * Deletes audit events older than AUDIT_RETENTION_DAYS, on every instance, every
 * AUDIT_PURGE_INTERVAL_MS (and once shortly after start). Each batch is a bounded DELETE that
 * skips rows another instance is deleting, so many instances purging at once neither block each
 * other nor do the same work twice, and there is no leader to elect.
 */
@Injectable()
export class AuditRetentionWorker {
  private readonly retentionDays: number;
  private readonly task: PeriodicTask;

  constructor(
    private readonly events: AuditRepository,
    @Inject(teamsConfig.KEY) teams: TeamsConfig,
    private readonly logger: PinoLogger,
    private readonly clock: Clock,
    jobs: BackgroundJobs,
  ) {
    this.logger.setContext(AuditRetentionWorker.name);
    this.retentionDays = teams.auditRetentionDays;
    this.task = jobs.periodic({
      intervalMs: teams.auditPurgeIntervalMs,
      firstDelayMs: Math.min(teams.auditPurgeIntervalMs, 10_000),
      run: async () => {
        const count = await this.purgeAll();
        if (count > 0) this.logger.info({ count }, 'purged audit events past retention');
      },
      onError: (error) => this.logger.error({ err: error }, 'audit purge failed'),
    });
  }

  /**
   * Deletes every event past retention now; answers how many. Waits for this instance's run in
   * progress, if any, which holds the rows it is working on.
   */
  purgeExpired(): Promise<number> {
    return this.task.exclusive(() => this.purgeAll());
  }

  private purgeAll(): Promise<number> {
    return inBatches(
      BATCH_SIZE,
      () =>
        this.events.deleteCreatedBefore(
          new Date(this.clock.nowMs() - this.retentionDays * DAY_MS),
          BATCH_SIZE,
        ),
      () => this.task.isStopped,
    );
  }
}
