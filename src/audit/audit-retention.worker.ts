import { Injectable, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import type { TeamsConfig } from '../config/teams.config';
import { AuditRepository } from './audit.repository';

/** Events deleted per statement; the worker loops until none are due. */
const BATCH_SIZE = 1_000;

/**
 * Deletes audit events older than AUDIT_RETENTION_DAYS, on every instance, every
 * AUDIT_PURGE_INTERVAL_MS (and once shortly after start). Each batch is a bounded DELETE that
 * skips rows another instance is deleting, so many instances purging at once neither block each
 * other nor do the same work twice, and there is no leader to elect.
 */
@Injectable()
export class AuditRetentionWorker implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly retentionDays: number;
  private readonly intervalMs: number;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly events: AuditRepository,
    config: ConfigService,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(AuditRetentionWorker.name);
    const teams = config.getOrThrow<TeamsConfig>('teams');
    this.retentionDays = teams.auditRetentionDays;
    this.intervalMs = teams.auditPurgeIntervalMs;
  }

  onApplicationBootstrap(): void {
    this.schedule(Math.min(this.intervalMs, 10_000));
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Deletes every event past retention now; answers how many. */
  async purgeExpired(): Promise<number> {
    let total = 0;
    for (;;) {
      const deleted = await this.events.deleteOlderThan(this.retentionDays, BATCH_SIZE);
      total += deleted;
      if (deleted < BATCH_SIZE || this.stopped) return total;
    }
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.purgeExpired()
        .then((count) => {
          if (count > 0) this.logger.info({ count }, 'purged audit events past retention');
        })
        .catch((error: unknown) => this.logger.error({ err: error }, 'audit purge failed'))
        .finally(() => this.schedule(this.intervalMs));
    }, delayMs);
    this.timer.unref();
  }
}
