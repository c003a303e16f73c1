import { Inject, Injectable, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import { ROOT_LOGGER } from '../common/logging/root-logger';
import type { EndUsersConfig } from '../config/end-users.config';
import { poolOf, withTransaction } from '../database/pg-pool';
import { MetricsService } from '../metrics/metrics.service';
import { UsageService } from '../usage/usage.service';

/** End users erased per transaction; the worker loops until none are due. */
const BATCH_SIZE = 20;

/**
 * Erases end users whose grace period is over. The schedule is the end_users row itself, so a
 * restart loses nothing; each batch is claimed with FOR UPDATE SKIP LOCKED inside the deleting
 * transaction, so two instances never erase the same user and a crash mid-way rolls back and is
 * redone by the next poll.
 */
@Injectable()
export class ErasureWorker implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly pool: Pool;
  private readonly intervalMs: number;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly logger: Logger;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    config: ConfigService,
    private readonly usage: UsageService,
    @Inject(ROOT_LOGGER) logger: Logger,
    private readonly audit: AuditService,
    metrics: MetricsService,
  ) {
    this.pool = poolOf(dataSource);
    this.intervalMs = config.getOrThrow<EndUsersConfig>('endUsers').erasurePollIntervalMs;
    this.logger = logger.child({ context: ErasureWorker.name });
    const countPending = () =>
      this.countPending().catch((error: unknown) => {
        this.logger.warn({ err: error }, 'erasure_pending: count failed');
        return undefined;
      });
    metrics.gauge({
      name: 'erasure_pending',
      help: 'End users in state deleting (grace period running or erasure due); database-wide',
      async collect() {
        // A failed count leaves the last value rather than failing the whole scrape.
        const pending = await countPending();
        if (pending !== undefined) this.set(pending);
      },
    });
  }

  /** Read at each scrape; the partial index end_users_erasure_due_idx covers it. */
  private async countPending(): Promise<number> {
    const { rows } = await this.pool.query<{ pending: number }>(
      `SELECT count(*)::int AS pending FROM end_users WHERE status = 'deleting'`,
    );
    return rows[0].pending;
  }

  onApplicationBootstrap(): void {
    this.schedule();
  }

  /** Before the database closes (TypeORM closes it at application shutdown), finish the batch. */
  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Erases every end user now due; answers how many. */
  async eraseDue(): Promise<number> {
    let total = 0;
    for (;;) {
      const erased = await this.eraseBatch();
      total += erased;
      if (erased < BATCH_SIZE || this.stopped) return total;
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.eraseDue()
        .then((count) => {
          if (count > 0) this.logger.info({ count }, 'erased end users');
        })
        .catch((error: unknown) => this.logger.error({ err: error }, 'erasure failed; retrying'))
        .finally(() => this.schedule());
    }, this.intervalMs);
    this.timer.unref();
  }

  private eraseBatch(): Promise<number> {
    return withTransaction(this.pool, async (client) => {
      const { rows } = await client.query<{ id: string; organization_id: string; user_id: string }>(
        `SELECT id, organization_id, user_id FROM end_users
          WHERE status = 'deleting' AND erase_after <= now()
          ORDER BY erase_after
          LIMIT $1
          FOR UPDATE SKIP LOCKED`,
        [BATCH_SIZE],
      );
      if (rows.length === 0) return 0;
      const ids = rows.map((row) => row.id);
      await client.query('DELETE FROM memories WHERE end_user_id = ANY($1::uuid[])', [ids]);
      await this.usage.eraseEndUsers(client, ids);
      await this.audit.redactErasedEndUsers(
        client,
        rows.map((row) => ({ organizationId: row.organization_id, userId: row.user_id })),
      );
      await client.query('DELETE FROM end_users WHERE id = ANY($1::uuid[])', [ids]);
      return ids.length;
    });
  }
}
