import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import type { Counter } from 'prom-client';
import type { EntityManager } from 'typeorm';
import { isDatabaseUnavailable } from '../common/errors/database-unavailable';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import type { PeriodicTask } from '../common/time/periodic-task';
import { embeddingsConfig } from '../config/embeddings.config';
import { Database } from '../database/database';
import { MetricsService } from '../metrics/metrics.service';
import { Columns, type RowOf } from '../database/columns';
import { sql } from '../database/sql';
import {
  BATCH_TIMEOUT_MS,
  Embedder,
  isProvidersAlone,
  isTimeout,
  isUnembeddable,
  TEXT_MAX_CHARS,
} from './embedder';
import {
  type EmbeddingSource,
  knowledgeChunksSource,
  memoriesSource,
  type PendingItem,
} from './embedding-source';

/** What the worker embeds: a batch of each in turn on each run. */
export const EMBEDDING_SOURCES: readonly EmbeddingSource[] = [
  memoriesSource,
  knowledgeChunksSource,
];

/** The longest pause after provider failures in a row. */
const BACKOFF_MAX_MS = 60_000;

/** A batch the provider answered that the database did not take: logged as the database's. */
class BatchNotStored extends Error {
  constructor(override readonly cause: unknown) {
    super('embedding batch not stored');
  }
}

/**
 * How long a claimed batch is its claimant's: four provider timeouts (2 minutes). Set and
 * compared by each instance's Clock: instances' clocks must agree within LEASE_MARGIN_MS (NTP
 * keeps them far closer); one further behind has its batches taken over and embedded again, and
 * its late vectors dropped, which costs provider calls but never a wrong or skipped row. The batch's call
 * takes at most one (the SDK does not retry: maxRetries 0); the calls that find the texts refused
 * (isolateRefused) start only while a whole timeout and LEASE_MARGIN_MS are left (a batch cut short so is
 * stored as far as it got), so a live instance always stores before its lease ends, and a batch
 * whose instance died waits at most this long for another.
 */
export const LEASE_MS = 4 * BATCH_TIMEOUT_MS;

/** Kept free at the lease's end: for the storing transaction, and instances' clocks that differ. */
const LEASE_MARGIN_MS = BATCH_TIMEOUT_MS;

/**
 * A text any provider embeds, sent when a batch is refused: embedded, the refusal was the texts'
 * (each refused alone is skipped); refused too, the provider's (a key, a model or dimensions it
 * will not take): retried with the backoff, nothing skipped.
 */
const PROBE_TEXT = 'Hello.';

/** A refused or failing part of a batch at most this long has its texts sent one by one, not in halves. */
const ONE_BY_ONE_UP_TO = 8;

/**
 * An item whose text failed alone (a 5xx, a timeout) while the provider embedded the probe: it
 * waits on its own, DEFERRED_FIRST_MS, doubling each time up to DEFERRED_MAX_MS, and its
 * organization's other items and every other organization's go on meanwhile (`attempts`,
 * `claimed_until` of its queue row). After DEFERRALS_MAX such tries it is passed over, as a
 * refused text is: it stays findable by its words.
 */
const DEFERRED = 'deferred';
export const DEFERRED_FIRST_MS = 60_000;
const DEFERRED_MAX_MS = 6 * 3_600_000;
export const DEFERRALS_MAX = 8;

/** An item's outcome: its vector, null (passed over: refused, or not embedded), or deferred. */
type Outcome = number[] | null | typeof DEFERRED;

/** What a store did with a batch's items: `handled` no longer leased to it, of which some counted. */
interface Stored {
  handled: number;
  /** Embedded, or passed over for good (refused, not embedded, failing too often). */
  embeddedOrPassedOver: number;
}

/** What the calls for a batch answered: outcomes for its first items, and why they stopped short. */
interface Answered {
  vectors: Outcome[];
  /** A call failing for the provider's reason (a 429, a probe refused) after others had answered; null: none. */
  failure: Error | null;
}

const asError = (error: unknown): Error =>
  error instanceof Error ? error : new Error('embeddings provider call failed');

/**
 * The characters a batch sends at most (its first item whatever its length), about 16,000
 * tokens: 64 texts of 8,000 characters (an import of long messages) made a call a slow
 * self-hosted provider could not answer within BATCH_TIMEOUT_MS, retried without end, and the
 * source stalled for every tenant (found by review).
 */
export const BATCH_MAX_CHARACTERS = 64_000;

/** The batch's first items whose texts, as sent, hold BATCH_MAX_CHARACTERS together; one at least. */
function withinCharacters<Item extends PendingItem>(items: Item[]): Item[] {
  let characters = 0;
  let taken = 0;
  for (const item of items) {
    characters += Math.min(item.text.length, TEXT_MAX_CHARS);
    if (taken > 0 && characters > BATCH_MAX_CHARACTERS) break;
    taken += 1;
  }
  return items.slice(0, taken);
}

/** A claimed cursor: its position and how far the source's ids are final (bigints, as text). */
const CLAIMED_CURSOR = Columns.computed<{ position: string; safe_bound: string }>({
  position: sql`c.position::text`,
  safe_bound: sql`c.safe_bound::text`,
});

/** How many of a source's new rows one statement queues. */
const QUEUE_ROWS_AT_ONCE = 5_000;

const QUEUED = Columns.computed<{ queued: number }>({
  queued: sql`(SELECT count(*) FROM picked)::int`,
});

/** An organization with items waiting. */
const TURN = Columns.computed<{ organization_id: string }>({
  organization_id: sql`organization_id::text`,
});

/** No organization's id sorts before it (ids are random, never nil) nor after the other. */
const FIRST_ORGANIZATION = '00000000-0000-0000-0000-000000000000';
const LAST_ORGANIZATION = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

/** A waiting item drawn for a batch: whose turn (its organization's place) brought it. */
const DRAWN = Columns.computed<{ id: string; turn: number; attempts: number }>({
  id: sql`c.row_id::text`,
  turn: sql`o.turn::int`,
  attempts: sql`c.attempts::int`,
});

/** An item drawn, locked for the batch: whether an expired lease is taken over. */
const FREE = Columns.computed<{ id: string; expired_lease: boolean }>({
  id: sql`row_id::text`,
  expired_lease: sql`claim_token IS NOT NULL`,
});

const TAKEN = Columns.computed<{ id: string }>({ id: sql`row_id::text` });

/**
 * Items drawn organization by organization (`turn`, then id within each), taken in rounds: each
 * organization's first, then each one's second, up to `limit`.
 */
export function inTurns<Item extends { turn: number }>(
  drawn: readonly Item[],
  limit: number,
): Item[] {
  const byTurn = new Map<number, Item[]>();
  for (const item of drawn) {
    const line = byTurn.get(item.turn);
    if (line) line.push(item);
    else byTurn.set(item.turn, [item]);
  }
  const lines = [...byTurn.values()];
  const taken: Item[] = [];
  for (let round = 0; taken.length < limit; round += 1) {
    const before = taken.length;
    for (const line of lines) {
      if (round < line.length && taken.length < limit) taken.push(line[round]);
    }
    if (taken.length === before) break;
  }
  return taken;
}

/** An item of the queue: its row's id and organization (the queue's key, with source and model). */
interface QueuedItem extends PendingItem {
  organizationId: string;
}

/**
 * The queue's rows of these items, by its primary key: every statement on items reaches them
 * through it, the one index the queue has (a second, on row ids alone, was chosen with an
 * added sort for the organizations' scan on a table without statistics, reading it whole).
 */
function queueRowsOf(
  source: EmbeddingSource,
  model: string,
  items: readonly { id: string; organizationId: string }[],
) {
  const organizations = [...new Set(items.map((item) => item.organizationId))];
  return sql`source = ${source.name} AND model = ${model}
         AND organization_id = ANY(${organizations}::uuid[])
         AND row_id = ANY(${items.map((item) => item.id)}::bigint[])`;
}

/** What a claim drew was only items whose rows are gone, now dropped: more may wait. */
const NONE_TAKEN = 'none taken';

/** A batch claimed under a lease on its items. */
interface LeasedBatch {
  items: QueuedItem[];
  /** More items may be waiting past these (lines read further, organizations past those read, a cut). */
  more: boolean;
  /** The lease's token: an item is stored only while the lease is still its. */
  token: string;
  /** Provider calls start only while one can end by this time (clock milliseconds). */
  callsEndBy: number;
}

/**
 * Embeds new memories and knowledge chunks in the background on every instance, never in a
 * reply's path (contract §27; docs/memory.md, "Recall by meaning"). Off, and registering no job,
 * without EMBEDDINGS_MODEL. A source's new rows are queued (embedding_queue) as its cursor passes
 * them; a batch is drawn from the queue in turns, organization by organization, and claimed in a
 * short transaction that locks its items `FOR UPDATE SKIP LOCKED` and records a lease on them
 * (LEASE_MS, a token of its own); the provider is called with no transaction open and no
 * connection held; a second short transaction stores the vectors and takes the items out of the
 * queue, only those whose lease is still this instance's. Other instances skip items whose lease
 * is live and take them over once it has expired (an instance that died, or one past its lease:
 * its late vectors are then dropped), so any number of instances embed side by side, each its
 * own batch, and each row is embedded once while they live. A provider failure gives the lease
 * back and the next run waits twice as long, up to a minute; a text the provider refuses (400,
 * 413, 422) is skipped alone and stays findable by its words, as is a text its source does not
 * embed (EmbeddingSource.embeds: a memory that only asks), which is never sent.
 */
@Injectable()
export class EmbeddingWorker {
  /** None without EMBEDDINGS_MODEL: nothing runs. */
  private readonly task: PeriodicTask | null;
  /**
   * Provider failures in a row, and when to try again, per source: a source whose batch keeps
   * failing waits alone, and the others go on.
   */
  private readonly backoff = new Map<string, { failures: number; nextAttemptAt: number }>();
  /** Per source, when this run last queued its new rows (clock milliseconds). */
  private readonly queuedAt = new Map<string, number>();
  /** Per source, the organization whose turn came last: the next batch's turns start after it. */
  private readonly nextTurnAfter = new Map<string, string>();
  private readonly failedRuns: Counter;
  private readonly embedded: Counter;

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
      help: 'Rows the embedding worker has embedded, or passed over (refused by the provider, or a memory that only asks)',
    });
    this.task = config.model
      ? jobs.periodic({
          intervalMs: config.pollIntervalMs,
          run: () => this.runWithBackoff(),
          onError: (error) => this.logger.error({ err: error }, 'embedding run failed'),
        })
      : null;
  }

  /**
   * A batch of every source whose backoff is over, in turn, round after round while any came
   * back full, until none did or shutdown begins: a source kept full (a tenant patching a large
   * document again and again) holds back no other, each of which is asked again every round;
   * and one's failure holds back no other either.
   */
  private async runWithBackoff(): Promise<void> {
    this.queuedAt.clear();
    for (let anyFull = true; anyFull;) {
      anyFull = false;
      for (const source of EMBEDDING_SOURCES) {
        if (this.task?.isStopped) return;
        const waitUntil = this.backoff.get(source.name)?.nextAttemptAt ?? 0;
        if (this.clock.nowMs() < waitUntil) continue;
        if (await this.nextBatchOf(source)) anyFull = true;
      }
    }
  }

  /** One batch of `source`; true when it was full (more may be waiting). */
  private async nextBatchOf(source: EmbeddingSource): Promise<boolean> {
    try {
      const full = await this.embedBatch(source);
      this.backoff.delete(source.name);
      return full;
    } catch (error) {
      const failures = (this.backoff.get(source.name)?.failures ?? 0) + 1;
      this.failedRuns.inc();
      const waitMs = Math.min(this.config.pollIntervalMs * 2 ** failures, BACKOFF_MAX_MS);
      this.backoff.set(source.name, {
        failures,
        nextAttemptAt: this.clock.nowMs() + waitMs * (0.5 + Math.random() / 2),
      });
      const stored = error instanceof BatchNotStored;
      const cause = stored ? error.cause : error;
      this.logger.warn(
        { err: cause, source: source.name, failures, waitMs },
        stored || isDatabaseUnavailable(cause)
          ? 'embedding batch not stored: retrying later'
          : 'embeddings provider failed: retrying later',
      );
      return false;
    }
  }

  /**
   * One batch of one source: its new rows queued, a batch drawn, embedded with no transaction
   * open, stored; false when none is left, other instances hold the rest, or this one lost its
   * lease meanwhile.
   */
  private async embedBatch(source: EmbeddingSource): Promise<boolean> {
    const model = this.embedder.vectorKind;
    if (!model) return false;
    await this.database.count(
      sql`INSERT INTO embedding_cursors (source, model) VALUES (${source.name}, ${model})
          ON CONFLICT DO NOTHING`,
    );
    // At a run's start, then once a poll interval: in a run that drains thousands, a batch a
    // provider call, queuing before each cost six more round trips a batch.
    const lastQueued = this.queuedAt.get(source.name);
    if (lastQueued === undefined || this.clock.nowMs() - lastQueued >= this.config.pollIntervalMs) {
      this.queuedAt.set(source.name, this.clock.nowMs());
      await this.queueNewRows(source, model);
    }
    // Shutting down: no new batch, nor its provider call of up to 30 s.
    if (this.task?.isStopped) return false;
    const batch = await this.claimBatch(source, model);
    if (batch === NONE_TAKEN) return true;
    if (!batch) return false;
    try {
      const { vectors, failure } = await this.embedWhatTells(source, batch);
      const stored = await this.store(source, model, batch, vectors).catch((error: unknown) => {
        throw new BatchNotStored(error);
      });
      // Deferred items wait: neither embedded nor passed over.
      this.embedded.inc(stored.embeddedOrPassedOver);
      // What was answered is stored; the rest waits out the backoff.
      if (failure !== null) throw failure;
      return batch.more && stored.handled === batch.items.length;
    } catch (error) {
      // The provider or the store failed: given back for the retry after the backoff (should
      // that fail too, the lease expires), so no instance waits LEASE_MS for it.
      await this.release(source, model, batch).catch((releaseError: unknown) =>
        this.logger.warn({ err: releaseError }, 'embedding lease not given back: it will expire'),
      );
      throw error;
    }
  }

  /**
   * Queues the source's rows above its cursor, as far as they are final, and moves the cursor
   * past them: QUEUE_ROWS_AT_ONCE a statement, each in a short transaction holding the cursor's
   * row, until none is left (an import of thousands is queued at once, so a row written after it
   * is in the queue for its organization's turn), another instance holds the cursor, or shutdown
   * begins. No provider call: many thousands a second.
   */
  private async queueNewRows(source: EmbeddingSource, model: string): Promise<void> {
    for (let queued = QUEUE_ROWS_AT_ONCE; queued === QUEUE_ROWS_AT_ONCE;) {
      if (this.task?.isStopped) return;
      queued = await this.database.transaction(async (manager) => {
        const cursor = await this.claimCursor(manager, source, model);
        if (!cursor) return 0;
        const moved = await this.database.row(
          QUEUED.query`WITH picked AS (
                ${source.newRows(cursor.position, cursor.safe_bound, QUEUE_ROWS_AT_ONCE)}),
              queued AS (
                INSERT INTO embedding_queue (source, model, row_id, organization_id)
                SELECT ${source.name}, ${model}, id, organization_id FROM picked
                ON CONFLICT DO NOTHING)
              UPDATE embedding_cursors
                 SET position = GREATEST(position, (SELECT max(id) FROM picked))
               WHERE source = ${source.name} AND model = ${model}
                 AND EXISTS (SELECT 1 FROM picked)
              RETURNING ${QUEUED}`,
          { manager },
        );
        return moved?.queued ?? 0;
      });
    }
  }

  /**
   * The source's next batch, leased to this instance in a short transaction; none: none to do,
   * or other instances hold what waits. Drawn in turns from the organizations with items
   * waiting, up to EMBEDDINGS_BATCH_SIZE of them, starting after the last one the previous
   * batch served (then from the first again), in rounds: each one's oldest item, then each
   * one's next, until the batch is full. A tenant's import of 20,000 memories
   * delayed another's new memory from 4 s to 46 s behind one cursor (review, 2026-12-05); now
   * it waits for one batch. Items leased by another instance are skipped (`SKIP LOCKED`, then
   * the lease), so instances embed different batches side by side; an expired lease (an
   * instance that died) is taken over. Items whose row is gone (an erasure) leave the queue.
   */
  private claimBatch(
    source: EmbeddingSource,
    model: string,
  ): Promise<LeasedBatch | typeof NONE_TAKEN | undefined> {
    return this.database.transaction(async (manager) => {
      const now = this.clock.now();
      const limit = this.config.batchSize;
      const after = this.nextTurnAfter.get(source.name) ?? FIRST_ORGANIZATION;
      const turns = await this.turns(manager, source, model, now, after, LAST_ORGANIZATION, limit);
      if (turns.length < limit && after !== FIRST_ORGANIZATION) {
        turns.push(
          ...(await this.turns(
            manager,
            source,
            model,
            now,
            FIRST_ORGANIZATION,
            after,
            limit - turns.length,
          )),
        );
      }
      if (turns.length === 0) return undefined;
      // Each line read as far as the batch could take from it (the others giving one each), and
      // one past: a line as long tells that more wait.
      const drawn = await this.database.rows(
        DRAWN.query`SELECT ${DRAWN}
             FROM unnest(${turns}::uuid[]) WITH ORDINALITY AS o (organization_id, turn)
            CROSS JOIN LATERAL (
                  SELECT q.row_id, q.attempts FROM embedding_queue q
                   WHERE q.source = ${source.name} AND q.model = ${model}
                     AND q.organization_id = o.organization_id
                     AND (q.claimed_until IS NULL OR q.claimed_until <= ${now})
                   ORDER BY q.row_id LIMIT ${limit - turns.length + 2}) c
            ORDER BY o.turn, c.row_id`,
        { manager },
      );
      // Locked, the lease checked again on the row's latest version: another instance's claim
      // that committed since the read is skipped, as is one still being made.
      const inBatch = inTurns(drawn, limit);
      // A text that failed alone before is tried alone again: in a batch, one that hangs cost
      // the batch's whole timeout, and the others' one by one after it, each time it came back
      // (review of the change).
      const retried = inBatch.find((item) => item.attempts > 0);
      const chosen = (retried ? [retried] : inBatch).map((item) => ({
        ...item,
        organizationId: turns[item.turn - 1],
      }));
      const free = new Map(
        (
          await this.database.rows(
            FREE.query`SELECT ${FREE} FROM embedding_queue
                 WHERE ${queueRowsOf(source, model, chosen)}
                   AND (claimed_until IS NULL OR claimed_until <= ${now})
                   FOR UPDATE SKIP LOCKED`,
            { manager },
          )
        ).map((item) => [item.id, item.expired_lease]),
      );
      const candidates = chosen.filter((item) => free.has(item.id));
      if (candidates.length === 0) {
        // Every one locked by another instance's claim or store: the next draw starts past
        // them. Drawing again at once spun while a store waited on a locked chunk (second review).
        if (chosen.length > 0) {
          this.nextTurnAfter.set(
            source.name,
            turns[Math.max(...chosen.map((item) => item.turn)) - 1],
          );
        }
        return undefined;
      }
      if (candidates.some((item) => free.get(item.id))) {
        this.logger.warn({ source: source.name }, 'embedding lease expired: taking the batch over');
      }
      const texts = new Map(
        (
          await this.database.rows(source.texts(candidates.map((item) => item.id)), { manager })
        ).map((item) => [item.id, item.text]),
      );
      const gone = candidates.filter((item) => !texts.has(item.id));
      if (gone.length > 0) {
        await this.database.count(
          sql`DELETE FROM embedding_queue WHERE ${queueRowsOf(source, model, gone)}`,
          { manager },
        );
      }
      const waiting = candidates
        .filter((item) => texts.has(item.id))
        .map((item) => ({ ...item, text: texts.get(item.id)! }));
      const items = withinCharacters(waiting);
      // The next batch's turns start after the last organization this one served: the cut
      // (characters, the batch's size) may leave later ones without their first item, and they
      // go first then. After the last one read, the same order would come again, and
      // organizations later by id than eight with long messages waited for all of their
      // backlogs (review of the queue, 2026-12-05).
      const lastServed = Math.max(...[...items, ...gone].map((item) => item.turn));
      this.nextTurnAfter.set(source.name, turns[lastServed - 1]);
      if (items.length === 0) return NONE_TAKEN;
      const token = randomUUID();
      const leasedUntil = now.getTime() + LEASE_MS;
      await this.database.count(
        sql`UPDATE embedding_queue
               SET claimed_until = ${new Date(leasedUntil)}, claim_token = ${token}::uuid
             WHERE ${queueRowsOf(source, model, items)}`,
        { manager },
      );
      return {
        items,
        // Items left in the lines read, organizations past those read, a cut by characters, or
        // a text tried alone.
        more:
          drawn.length > limit ||
          turns.length === limit ||
          items.length < waiting.length ||
          chosen.length < inBatch.length,
        token,
        callsEndBy: leasedUntil - LEASE_MARGIN_MS,
      };
    });
  }

  /**
   * Up to `limit` organizations with items of the source waiting and not leased at `now`, after
   * `after` up to `until`, by id: a loose scan of the queue's index, one probe an organization
   * (passing at most the items other instances hold), however many items each has. Counting
   * organizations whose items were all leased, another instance drew the same ones as the
   * batch in flight, found nothing free, and added no throughput (second review).
   */
  private async turns(
    manager: EntityManager,
    source: EmbeddingSource,
    model: string,
    now: Date,
    after: string,
    until: string,
    limit: number,
  ): Promise<string[]> {
    const rows = await this.database.rows(
      TURN.query`WITH RECURSIVE turns AS (
            (SELECT q.organization_id FROM embedding_queue q
              WHERE q.source = ${source.name} AND q.model = ${model}
                AND q.organization_id > ${after}::uuid AND q.organization_id <= ${until}::uuid
                AND (q.claimed_until IS NULL OR q.claimed_until <= ${now})
              ORDER BY q.organization_id LIMIT 1)
            UNION ALL
            SELECT (SELECT q.organization_id FROM embedding_queue q
                     WHERE q.source = ${source.name} AND q.model = ${model}
                       AND q.organization_id > t.organization_id
                       AND q.organization_id <= ${until}::uuid
                       AND (q.claimed_until IS NULL OR q.claimed_until <= ${now})
                     ORDER BY q.organization_id LIMIT 1)
              FROM turns t WHERE t.organization_id IS NOT NULL)
          SELECT ${TURN} FROM turns WHERE organization_id IS NOT NULL LIMIT ${limit}`,
      { manager },
    );
    return rows.map((row) => row.organization_id);
  }

  /**
   * Stores the vectors of the batch's first `vectors.length` items and takes them out of the
   * queue, in a short transaction: those whose lease is still ours (another instance that took
   * some over stores those); the lease on the rest is given back. Answers what became of them.
   */
  private async store(
    source: EmbeddingSource,
    model: string,
    batch: LeasedBatch,
    vectors: readonly Outcome[],
  ): Promise<Stored> {
    if (vectors.length === 0) {
      await this.release(source, model, batch);
      return { handled: 0, embeddedOrPassedOver: 0 };
    }
    const answered = batch.items.slice(0, vectors.length);
    const deferred = answered.filter((_, i) => vectors[i] === DEFERRED);
    const done = answered.filter((_, i) => vectors[i] !== DEFERRED);
    const stored = await this.database.transaction(async (manager) => {
      const kept =
        deferred.length === 0
          ? { waiting: 0, passedOver: 0 }
          : await this.defer(source, model, batch, deferred, manager);
      // Locks the items first: a takeover waits for this transaction, and then finds none.
      const ours = new Set(
        done.length === 0
          ? []
          : (
              await this.database.rows(
                TAKEN.query`DELETE FROM embedding_queue
                     WHERE ${queueRowsOf(source, model, done)} AND claim_token = ${batch.token}::uuid
                    RETURNING ${TAKEN}`,
                { manager },
              )
            ).map((row) => row.id),
      );
      const embedded = answered
        .map((item, i) => ({ id: item.id, embedding: vectors[i] }))
        .filter(
          (item): item is { id: string; embedding: number[] } =>
            Array.isArray(item.embedding) && ours.has(item.id),
        );
      if (embedded.length > 0) {
        await this.database.count(source.store(JSON.stringify(embedded), model), { manager });
      }
      // The calls ran short (the lease's time, shutdown): the rest waits for a batch again.
      if (answered.length < batch.items.length) await this.release(source, model, batch, manager);
      return {
        handled: ours.size + kept.waiting + kept.passedOver,
        embeddedOrPassedOver: ours.size + kept.passedOver,
      };
    });
    if (stored.handled < answered.length) {
      this.logger.warn(
        { source: source.name, items: answered.length - stored.handled },
        'embedding lease expired before the batch was stored: another instance took it over',
      );
    }
    return stored;
  }

  /**
   * The items whose texts failed alone wait on their own (DEFERRED_FIRST_MS, doubling), no longer
   * leased; one that has failed so DEFERRALS_MAX times leaves the queue, passed over. Only those
   * whose lease is still ours. Answers how many of each.
   */
  private async defer(
    source: EmbeddingSource,
    model: string,
    batch: LeasedBatch,
    items: readonly QueuedItem[],
    manager: EntityManager,
  ): Promise<{ waiting: number; passedOver: number }> {
    const now = this.clock.now();
    const waitSeconds = sql`least(${DEFERRED_FIRST_MS / 1000}::float8 * power(2, attempts),
                                  ${DEFERRED_MAX_MS / 1000}::float8)`;
    const waiting = await this.database.count(
      sql`UPDATE embedding_queue
             SET attempts = attempts + 1, claim_token = NULL,
                 claimed_until = ${now}::timestamptz + make_interval(secs => ${waitSeconds})
           WHERE ${queueRowsOf(source, model, items)} AND claim_token = ${batch.token}::uuid
             AND attempts + 1 < ${DEFERRALS_MAX}`,
      { manager },
    );
    const passedOver = await this.database.count(
      sql`DELETE FROM embedding_queue
           WHERE ${queueRowsOf(source, model, items)} AND claim_token = ${batch.token}::uuid`,
      { manager },
    );
    this.logger.warn(
      { source: source.name, waiting, passedOver },
      passedOver > 0
        ? `text failing alone at the embeddings provider ${DEFERRALS_MAX} times: skipped`
        : 'text failing alone at the embeddings provider: it waits on its own',
    );
    return { waiting, passedOver };
  }

  /** Ends the batch's lease on its items that still hold it: they wait for a batch again. */
  private async release(
    source: EmbeddingSource,
    model: string,
    batch: LeasedBatch,
    manager?: EntityManager,
  ): Promise<void> {
    // By key, not by token alone: the queue has no index on tokens, and may hold a million items.
    await this.database.count(
      sql`UPDATE embedding_queue SET claimed_until = NULL, claim_token = NULL
           WHERE ${queueRowsOf(source, model, batch.items)} AND claim_token = ${batch.token}::uuid`,
      { manager },
    );
  }

  /**
   * Locks the source's cursor unless another instance is moving it (none), and moves its safe
   * bound. Ids are taken before commit, so a newer id can be visible while an older one is not
   * yet: the worker reads only up to `safe_bound`, the last id taken when an earlier run looked,
   * once every transaction that was running a run after that look has ended (its snapshot's
   * xmax is behind the current xmin). An id is then final: committed, or rolled back for good.
   * Costs two to three poll intervals of delay, and no write per reply.
   */
  private async claimCursor(
    manager: EntityManager,
    source: EmbeddingSource,
    model: string,
  ): Promise<RowOf<typeof CLAIMED_CURSOR> | undefined> {
    const free = await this.database.count(
      sql`SELECT FROM embedding_cursors WHERE source = ${source.name} AND model = ${model}
             FOR UPDATE SKIP LOCKED`,
      { manager },
    );
    if (free === 0) return undefined;
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

  /**
   * The vectors of the batch's items, in order, as far as they go: null for an item the source
   * does not embed, which costs no call.
   */
  private async embedWhatTells(source: EmbeddingSource, batch: LeasedBatch): Promise<Answered> {
    const embeds = batch.items.map((item) => source.embeds(item.text));
    const embedded = batch.items.filter((_, index) => embeds[index]);
    const { vectors, failure } =
      embedded.length === 0
        ? { vectors: [], failure: null }
        : await this.embedOrIsolate(embedded, batch.callsEndBy, { probe: true });
    const inOrder: Outcome[] = [];
    let next = 0;
    for (let index = 0; index < batch.items.length; index += 1) {
      if (!embeds[index]) inOrder.push(null);
      else if (next < vectors.length) inOrder.push(vectors[next++]);
      // The calls ran short: the rest is the next batch's.
      else break;
    }
    return { vectors: inOrder, failure };
  }

  /** Whether the provider embeds PROBE_TEXT (no: a refusal is the provider's, not the texts'). */
  private async embedsProbe(callsEndBy: number): Promise<boolean> {
    if (this.clock.nowMs() + BATCH_TIMEOUT_MS > callsEndBy) return false;
    try {
      await this.embedder.embed([PROBE_TEXT]);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The outcomes of items whose call failed together for a reason that may be a text's (`cause`:
   * refused, or a 5xx or timeout while the provider embeds the probe), in order, as far as they
   * go: sent again in halves, and a part of ONE_BY_ONE_UP_TO or fewer one by one, until each
   * text at fault is alone; after a timeout, one by one at once. A refused one is skipped (null);
   * a failing one waits on its own (deferred), once the probe, embedded again, shows the provider
   * still works (`probed`: it was just sent for these very items), and comes back alone. One
   * refused or failing text among 64 costs 16 calls, the probe included, not the 65 of sending
   * each alone; however they lie, at most 80 and a probe for each failing one; after a timeout,
   * up to 64 and a probe each. A call failing for the provider's reason (a 429) keeps what the
   * calls before it answered, and is answered as the failure.
   */
  private async isolate(
    items: readonly PendingItem[],
    callsEndBy: number,
    cause: unknown,
    probed: boolean,
  ): Promise<Answered> {
    if (items.length === 1) {
      if (isUnembeddable(cause)) {
        this.logger.warn({ id: items[0].id }, 'text refused by the embeddings provider: skipped');
        return { vectors: [null], failure: null };
      }
      // The provider may have failed meanwhile: then it is its failure, not the text's. Without
      // the time for a probe, the text waits on its own: a minute lost, never a text.
      const probeFits = this.clock.nowMs() + BATCH_TIMEOUT_MS <= callsEndBy;
      if (!probed && probeFits && !(await this.embedsProbe(callsEndBy))) {
        return { vectors: [], failure: asError(cause) };
      }
      return { vectors: [DEFERRED], failure: null };
    }
    // After a timeout, one by one: each part holding the text that hangs costs a whole timeout,
    // and halving spent the lease's time on the batch, its half and its quarter before the text
    // was ever sent alone, so the batch came back again and again (review of the change).
    const half = Math.ceil(items.length / 2);
    const parts =
      items.length > ONE_BY_ONE_UP_TO && !isTimeout(cause)
        ? [items.slice(0, half), items.slice(half)]
        : items.map((item) => [item]);
    const vectors: Outcome[] = [];
    for (const part of parts) {
      // Shutting down: what is done is stored, the rest is the next batch's; no failure.
      if (this.task?.isStopped) return { vectors, failure: null };
      let answered: Answered;
      try {
        answered = await this.embedOrIsolate(part, callsEndBy, { probe: false });
      } catch (error) {
        return { vectors, failure: asError(error) };
      }
      vectors.push(...answered.vectors);
      // The lease runs short, or a call failed: the rest is the next batch's. Nothing answered
      // at all: the failure that began it stands, and the source backs off (and says so).
      if (answered.failure !== null || answered.vectors.length < part.length) {
        const failure =
          answered.failure ??
          (vectors.length === 0 && !this.task?.isStopped ? asError(cause) : null);
        return { vectors, failure };
      }
    }
    return { vectors, failure: null };
  }

  /**
   * The outcomes of the items (a batch, or a part of one), in order, in one call. Failed for the
   * provider's reason whatever the texts (401, 403, 404, 429: isProvidersAlone), the failure is
   * thrown (retried with the source's backoff, nothing skipped). Refused (400, 413, 422, vectors
   * the service cannot use) or failed otherwise (a 5xx, a timeout), for a batch a text any
   * provider embeds is sent first (`probe`): refused or failing too, the provider is at fault
   * and the failure is thrown; embedded, the texts may be, and they are sent apart (isolate). A
   * call starts only while it can end by `callsEndBy`: past it, the outcomes of the first items
   * only (none: not even the first call could start).
   */
  private async embedOrIsolate(
    items: readonly PendingItem[],
    callsEndBy: number,
    { probe }: { probe: boolean },
  ): Promise<Answered> {
    if (this.clock.nowMs() + BATCH_TIMEOUT_MS > callsEndBy) return { vectors: [], failure: null };
    let cause: unknown;
    try {
      return { vectors: await this.embedder.embed(items.map((item) => item.text)), failure: null };
    } catch (error) {
      if (isProvidersAlone(error) || (probe && !(await this.embedsProbe(callsEndBy)))) throw error;
      cause = error;
    }
    return this.isolate(items, callsEndBy, cause, probe);
  }
}
