import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import type { Counter } from 'prom-client';
import type { EntityManager } from 'typeorm';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import type { PeriodicTask } from '../common/time/periodic-task';
import { embeddingsConfig } from '../config/embeddings.config';
import { Database } from '../database/database';
import { MetricsService } from '../metrics/metrics.service';
import { Columns, type RowOf } from '../database/columns';
import { sql } from '../database/sql';
import { Embedder, isUnembeddable } from './embedder';
import {
  type EmbeddingSource,
  knowledgeChunksSource,
  memoriesSource,
  type PendingItem,
} from './embedding-source';

/** What the worker embeds, in this order on each run. */
export const EMBEDDING_SOURCES: readonly EmbeddingSource[] = [
  memoriesSource,
  knowledgeChunksSource,
];

/** The longest pause after provider failures in a row. */
const BACKOFF_MAX_MS = 60_000;

/** A cursor's position (bigint, as text). */
const POSITION = Columns.computed<{ position: string }>({ position: sql`position::text` });

/** A claimed cursor: its position and how far the source's ids are final (bigints, as text). */
const CLAIMED_CURSOR = Columns.computed<{ position: string; safe_bound: string }>({
  position: sql`c.position::text`,
  safe_bound: sql`c.safe_bound::text`,
});

/**
 * Embeds new memories and knowledge chunks in the background on every instance, never in a reply's path (contract
 * §27; docs/memory.md, "Recall by meaning"). Off, and registering no job, without
 * EMBEDDINGS_MODEL. Each batch is claimed by locking its source's cursor row `FOR UPDATE SKIP
 * LOCKED`: one instance embeds a source at a time and the others skip it, so any number of
 * instances run side by side and each row is embedded once. A provider failure rolls the batch
 * back (the cursor does not move) and the next run waits twice as long, up to a minute; a text
 * the provider refuses (400, 413, 422) is skipped alone and stays findable by its words.
 */
@Injectable()
export class EmbeddingWorker {
  /** None without EMBEDDINGS_MODEL: nothing runs. */
  private readonly task: PeriodicTask | null;
  private failures = 0;
  private readonly failedRuns: Counter;
  private readonly embedded: Counter;
  private nextAttemptAt = 0;

  constructor(
    private readonly database: Database,
    private readonly embedder: Embedder,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    @Inject(embeddingsConfig.KEY) private readonly config: ConfigType<typeof embeddingsConfig>,
    jobs: BackgroundJobs,
    metrics: MetricsService,
  ) {
    this.logger.setContext(EmbeddingWorker.name);
    this.failedRuns = metrics.counter({
      name: 'embeddings_worker_failures_total',
      help: 'Runs of the embedding worker that failed (the provider, mostly); each is retried later',
    });
    this.embedded = metrics.counter({
      name: 'embeddings_embedded_total',
      help: 'Rows the embedding worker has embedded (or skipped as refused by the provider)',
    });
    this.task = config.model
      ? jobs.periodic({
          intervalMs: config.pollIntervalMs,
          run: () => this.runWithBackoff(),
          onError: (error) => this.logger.error({ err: error }, 'embedding run failed'),
        })
      : null;
  }

  private async runWithBackoff(): Promise<void> {
    if (this.clock.now().getTime() < this.nextAttemptAt) return;
    try {
      await this.embedAll();
      this.failures = 0;
    } catch (error) {
      this.failures += 1;
      this.failedRuns.inc();
      const waitMs = Math.min(this.config.pollIntervalMs * 2 ** this.failures, BACKOFF_MAX_MS);
      this.nextAttemptAt = this.clock.now().getTime() + waitMs * (0.5 + Math.random() / 2);
      this.logger.warn(
        { err: error, failures: this.failures, waitMs },
        'embeddings provider failed: retrying later',
      );
    }
  }

  /** Every source, batch after batch, until one comes back short or shutdown begins. */
  private async embedAll(): Promise<void> {
    for (const source of EMBEDDING_SOURCES) {
      for (;;) {
        const done = await this.embedBatch(source);
        this.embedded.inc(done);
        if (done < this.config.batchSize || this.task?.isStopped) break;
      }
    }
  }

  /** One batch of one source in one transaction; 0 when none is left or another instance is on it. */
  private async embedBatch(source: EmbeddingSource): Promise<number> {
    const model = this.embedder.vectorKind;
    if (!model) return 0;
    await this.database.count(
      sql`INSERT INTO embedding_cursors (source, model) VALUES (${source.name}, ${model})
          ON CONFLICT DO NOTHING`,
    );
    return this.database.transaction(async (manager) => {
      const cursor = await this.claim(manager, source, model);
      if (!cursor) return 0;
      const items = await this.database.rows(
        source.pending(cursor.position, cursor.safe_bound, this.config.batchSize),
        { manager },
      );
      if (items.length === 0) return 0;
      const vectors = await this.embedOrSkip(items);
      const embedded = items
        .map((item, i) => ({ id: item.id, embedding: vectors[i] }))
        .filter((item) => item.embedding !== null);
      if (embedded.length > 0) {
        await this.database.count(source.store(JSON.stringify(embedded), model), { manager });
      }
      await this.database.count(
        sql`UPDATE embedding_cursors SET position = ${items[items.length - 1].id}::bigint
             WHERE source = ${source.name} AND model = ${model}`,
        { manager },
      );
      return items.length;
    });
  }

  /**
   * Locks the source's cursor (none: another instance holds it) and moves its safe bound. Ids are
   * taken before commit, so a newer id can be visible while an older one is not yet: the worker
   * reads only up to `safe_bound`, the last id taken when an earlier run looked, once every
   * transaction that was running a run after that look has ended (its snapshot's xmax is behind
   * the current xmin). An id is then final: committed, or rolled back for good. Costs two to
   * three poll intervals of delay, and no write per reply.
   */
  private async claim(
    manager: EntityManager,
    source: EmbeddingSource,
    model: string,
  ): Promise<RowOf<typeof CLAIMED_CURSOR> | undefined> {
    const locked = await this.database.row(
      POSITION.query`SELECT ${POSITION} FROM embedding_cursors
           WHERE source = ${source.name} AND model = ${model}
             FOR UPDATE SKIP LOCKED`,
      { manager },
    );
    if (!locked) return undefined;
    return this.database.row(
      CLAIMED_CURSOR.query`WITH now AS (
            SELECT (${source.lastId}) AS last_id,
                   pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
                   pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax),
          state AS (
            SELECT c.pending_bound, c.pending_xmax, now.*,
                   c.pending_xmax IS NOT NULL AND now.xmin >= c.pending_xmax AS promote
              FROM embedding_cursors c, now
             WHERE c.source = ${source.name} AND c.model = ${model})
          UPDATE embedding_cursors c
             SET safe_bound = CASE WHEN s.promote THEN s.pending_bound ELSE c.safe_bound END,
                 pending_bound = CASE WHEN s.promote OR s.pending_bound IS NULL THEN s.last_id
                                      ELSE s.pending_bound END,
                 pending_xmax = CASE WHEN s.promote OR s.pending_bound IS NULL THEN NULL
                                     ELSE COALESCE(s.pending_xmax, s.xmax) END
            FROM state s
           WHERE c.source = ${source.name} AND c.model = ${model}
          RETURNING ${CLAIMED_CURSOR}`,
      { manager },
    );
  }

  /** The batch's vectors; a text the provider refuses alone gets null (the others are kept). */
  private async embedOrSkip(items: readonly PendingItem[]): Promise<(number[] | null)[]> {
    try {
      return await this.embedder.embed(items.map((item) => item.text));
    } catch (error) {
      if (!isUnembeddable(error)) throw error;
      if (items.length === 1) {
        this.logger.warn(
          { err: error, id: items[0].id },
          'text refused by the embeddings provider: skipped',
        );
        return [null];
      }
      const vectors: (number[] | null)[] = [];
      for (const item of items) vectors.push(...(await this.embedOrSkip([item])));
      return vectors;
    }
  }
}
