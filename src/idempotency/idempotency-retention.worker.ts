import { Injectable, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { IdempotencyRepository } from './idempotency.repository';
import { IDEMPOTENCY_RETENTION_MS } from './idempotency.service';

/** Keys deleted per statement; the worker loops until none are due. */
const BATCH_SIZE = 1_000;
/** Keys live 24 hours; an hourly purge keeps at most an hour's worth of expired ones. */
const PURGE_INTERVAL_MS = 60 * 60 * 1000;

/**
 * Deletes idempotency keys older than 24 hours, on every instance, every hour (and once shortly
 * after start). Each batch is a bounded DELETE that skips rows another instance is deleting, so
 * many instances purging at once neither block each other nor do the same work twice, and there
 * is no leader to elect. An expired key not yet purged is already ignored by the claim and the
 * lookup, so the purge only reclaims space.
 */
@Injectable()
export class IdempotencyRetentionWorker implements OnApplicationBootstrap, OnModuleDestroy {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly keys: IdempotencyRepository,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(IdempotencyRetentionWorker.name);
  }

  onApplicationBootstrap(): void {
    this.schedule(10_000);
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Deletes every key past retention now; answers how many. */
  async purgeExpired(): Promise<number> {
    let total = 0;
    for (;;) {
      const deleted = await this.keys.deleteOlderThan(IDEMPOTENCY_RETENTION_MS, BATCH_SIZE);
      total += deleted;
      if (deleted < BATCH_SIZE || this.stopped) return total;
    }
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.purgeExpired()
        .then((count) => {
          if (count > 0) this.logger.info({ count }, 'purged idempotency keys past retention');
        })
        .catch((error: unknown) => this.logger.error({ err: error }, 'idempotency purge failed'))
        .finally(() => this.schedule(PURGE_INTERVAL_MS));
    }, delayMs);
    this.timer.unref();
  }
}
