import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import OpenAI, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from 'openai';
import type { Counter } from 'prom-client';
import { PinoLogger } from 'nestjs-pino';
import { embeddingsConfig } from '../config/embeddings.config';
import { engineConfig } from '../config/engine.config';
import { Columns } from '../database/columns';
import { Database } from '../database/database';
import { PGVECTOR_USABLE } from '../database/migrations/1795920700000-AddPgvectorColumns';
import { raw, sql } from '../database/sql';
import { MetricsService } from '../metrics/metrics.service';

/** A text's first characters only: a memory or question past this says nothing more to a ranking. */
export const TEXT_MAX_CHARS = 8_000;

/** Half a surrogate pair: JSON can carry one (`"\ud83d"`), and strict parsers refuse it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * `text` with each lone surrogate (a message's, or left by cutting between a pair) replaced by
 * U+FFFD, as String.prototype.toWellFormed (ES2024) does.
 */
export function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, '\uFFFD');
}

/** The worker's provider calls: long enough for a batch, short enough to hold a claim (LEASE_MS). */
export const BATCH_TIMEOUT_MS = 30_000;

/** A question's embedding for one search or recall, and how far to compare it (memoryRanking). */
export interface QueryEmbedding {
  /** Embedder.vectorKind: only vectors of the same kind are compared. */
  model: string;
  vector: number[];
  candidates: number;
  minSimilarity: number;
  wholeVectors: 'pgvector' | 'array';
}

/** Whether both embeddings tables have pgvector's copy of each vector (migration AddPgvectorColumns). */
const PGVECTOR_COLUMNS = Columns.computed<{ present: boolean }>({
  present: sql`count(*) = 2`,
});

/**
 * The OpenAI-compatible `/v1/embeddings` of EMBEDDINGS_BASE_URL (contract §27), through the
 * `openai` SDK. Vectors come back at unit length, so that a dot product is their cosine.
 */
@Injectable()
export class Embedder implements OnModuleInit {
  /** null: recall by meaning is off. */
  readonly model: string | null;
  /**
   * What made a vector, as stored beside it: the model, and the dimensions asked for (a model
   * shortened to 256 gives vectors that cannot be compared with its 1,536). null: off.
   */
  readonly vectorKind: string | null;
  private readonly client: OpenAI | null;
  private readonly queryTimeoutMs: number;
  private readonly dimensions: number | undefined;
  private readonly candidates: number;
  private readonly minSimilarity: number;
  /** Decided at start-up: the schema's columns do not change under a running release. */
  private wholeVectors: 'pgvector' | 'array' = 'array';
  private readonly fallbacks: Counter<'reason'>;
  /**
   * Questions being embedded, by organization and text: a reply's memory recall and knowledge
   * retrieval share one call. Never shared between organizations (found by review): another
   * tenant's answer coming early would tell that someone asks the same text at that moment, and
   * its failure would rank this one's by words alone.
   */
  private readonly inFlight = new Map<string, Promise<QueryEmbedding | null>>();

  constructor(
    @Inject(embeddingsConfig.KEY) config: ConfigType<typeof embeddingsConfig>,
    @Inject(engineConfig.KEY) engine: ConfigType<typeof engineConfig>,
    private readonly logger: PinoLogger,
    metrics: MetricsService,
    private readonly database: Database,
  ) {
    this.logger.setContext(Embedder.name);
    this.model = config.model;
    this.vectorKind =
      config.model && config.dimensions !== undefined
        ? `${config.model}/${config.dimensions}`
        : config.model;
    this.queryTimeoutMs = config.queryTimeoutMs;
    this.dimensions = config.dimensions;
    this.candidates = config.candidates;
    this.minSimilarity = config.minSimilarity;
    this.client = config.model
      ? new OpenAI({
          apiKey: config.apiKey ?? engine.openaiApiKey,
          baseURL: config.baseUrl ?? engine.openaiBaseUrl,
          maxRetries: 0,
          timeout: BATCH_TIMEOUT_MS,
        })
      : null;
    this.fallbacks = metrics.counter({
      name: 'embeddings_query_fallbacks_total',
      help: 'Searches and recalls ranked by words alone: the question could not be embedded in EMBEDDINGS_QUERY_TIMEOUT_MS',
      labelNames: ['reason'],
    });
  }

  async onModuleInit(): Promise<void> {
    if (!this.vectorKind) return;
    const columns = await this.database.row(
      PGVECTOR_COLUMNS.query`SELECT ${PGVECTOR_COLUMNS} FROM pg_attribute
        WHERE attrelid IN (to_regclass('memory_embeddings'), to_regclass('knowledge_chunk_embeddings'))
          AND attname = 'vector' AND NOT attisdropped AND ${raw(PGVECTOR_USABLE)}
          AND atttypid = to_regtype('vector')`,
    );
    this.wholeVectors = columns?.present ? 'pgvector' : 'array';
    this.logger.info({ wholeVectors: this.wholeVectors }, 'recall by meaning on');
  }

  /**
   * The embeddings of `texts`, in order, within `timeoutMs` (the answer's body included); rejects
   * with the provider's error (the worker retries), or InvalidVectorError for an answer that is
   * not one vector per text.
   */
  async embed(texts: readonly string[], timeoutMs = BATCH_TIMEOUT_MS): Promise<number[][]> {
    if (!this.client || !this.model) throw new Error('Embedder: EMBEDDINGS_MODEL is not set');
    const response = await this.client.embeddings.create(
      {
        model: this.model,
        input: texts.map((text) => wellFormed(text.slice(0, TEXT_MAX_CHARS))),
        encoding_format: 'float',
        ...(this.dimensions === undefined ? {} : { dimensions: this.dimensions }),
      },
      // The SDK's timeout ends when the headers arrive; the signal also bounds the body.
      { timeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs) },
    );
    const vectors = inOrder(response.data, texts.length);
    // A provider ignoring the dimensions asked would store vectors no question is compared with.
    const unasked = vectors.find((vector) => vector.length !== (this.dimensions ?? vector.length));
    if (unasked) {
      throw new InvalidVectorError(
        `Embedder: ${this.dimensions} dimensions asked (EMBEDDINGS_DIMENSIONS), ${unasked.length} answered`,
      );
    }
    return vectors;
  }

  /**
   * The embedding of a search's or a reply's question, or null (off, or the provider failed or
   * took more than EMBEDDINGS_QUERY_TIMEOUT_MS): the caller then ranks by words alone, as with
   * embeddings off. Never rejects.
   */
  embedQuery(organizationId: string, text: string): Promise<QueryEmbedding | null> {
    // A NUL is in no UUID: no organization's key can end where another's text begins.
    const key = `${organizationId}\0${text}`;
    const pending = this.inFlight.get(key);
    if (pending) return pending;
    const embedding = this.embedQueryNow(text).finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, embedding);
    return embedding;
  }

  private async embedQueryNow(text: string): Promise<QueryEmbedding | null> {
    if (!this.vectorKind) return null;
    try {
      const [vector] = await this.embed([text], this.queryTimeoutMs);
      return {
        model: this.vectorKind,
        vector,
        candidates: this.candidates,
        minSimilarity: this.minSimilarity,
        wholeVectors: this.wholeVectors,
      };
    } catch (error) {
      this.fallbacks.inc({ reason: fallbackReason(error) });
      this.logger.warn(
        { err: error, timeoutMs: this.queryTimeoutMs },
        'question not embedded: ranking by words alone',
      );
      return null;
    }
  }
}

/** What a provider answers for a text it will not embed (too long, malformed, too large). */
const REFUSED_TEXT_STATUSES: readonly number[] = [400, 413, 422];

/**
 * A provider's answer that may be the texts' (400, 413, 422: a text it will not embed; a vector
 * the service cannot use), so worth sending the texts apart. Any other is the provider's or the
 * operator's (401 and 403 a key revoked or out of credit, 404 a model misspelt, 408, 409, 429,
 * 5xx): retried with backoff, never a reason to skip a text, which would lose every text written
 * while it lasts (found by review).
 */
export function isUnembeddable(error: unknown): boolean {
  if (error instanceof InvalidVectorError) return true;
  if (!(error instanceof APIError)) return false;
  const status: unknown = error.status;
  return typeof status === 'number' && REFUSED_TEXT_STATUSES.includes(status);
}

/** What a provider answers for itself, whatever the texts: a key, a model, a rate. */
const PROVIDER_STATUSES: readonly number[] = [401, 403, 404, 429];

/**
 * A failure that is the provider's or the operator's whatever was sent (401, 403, 404, 429):
 * the whole source waits out its backoff. Any other that is not a refusal (a 5xx, a timeout, a
 * connection that broke) may be one text's: self-hosted servers answer 500 for an input past
 * their context, and a text can make one hang, so the worker asks the probe before it blames
 * the provider (found by review: one end user's message stopped every tenant's embeddings).
 */
export function isProvidersAlone(error: unknown): boolean {
  if (!(error instanceof APIError)) return false;
  const status: unknown = error.status;
  return typeof status === 'number' && PROVIDER_STATUSES.includes(status);
}

/**
 * One unit vector per text, in the order sent: every `index` an integer below `count`, each once
 * (a hole left by a missing or repeated one would pass for a vector).
 */
export function inOrder(data: ReadonlyArray<{ index: number; embedding: unknown }>, count: number) {
  const vectors = new Array<number[] | undefined>(count).fill(undefined);
  for (const item of data) {
    const { index } = item;
    if (!Number.isInteger(index) || index < 0 || index >= count || vectors[index] !== undefined) {
      throw new InvalidVectorError(
        `Embedder: the provider answered index ${String(index)} for ${count} texts`,
      );
    }
    vectors[index] = unitLength(item.embedding);
  }
  const missing = vectors.findIndex((vector) => vector === undefined);
  if (missing !== -1) {
    throw new InvalidVectorError(
      `Embedder: ${count} texts sent, ${data.length} embeddings back (none for ${missing})`,
    );
  }
  return vectors as number[][];
}

/**
 * A call that ran past its time: the SDK's timeout, or the signal's abort (the body past the
 * deadline), a user abort to the SDK, or the fetch's own AbortError or TimeoutError when the body
 * was being read.
 */
export function isTimeout(error: unknown): boolean {
  return (
    error instanceof APIConnectionTimeoutError ||
    error instanceof APIUserAbortError ||
    (error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError'))
  );
}

function fallbackReason(error: unknown): string {
  // Subclasses first: a timeout is a connection error, a connection error an APIError.
  if (isTimeout(error)) return 'timeout';
  if (error instanceof APIConnectionError) return 'unreachable';
  if (error instanceof APIError) return 'error';
  return 'invalid';
}

/**
 * The longest vector taken: past it a sketch (one bit per dimension) no longer fits the btree
 * entry of its index (docs/memory.md, "The bound"); the longest models give 4,096.
 */
export const MAX_DIMENSIONS = 8_192;

/** The smallest magnitude PostgreSQL's `real` takes as text (below it: "out of range"). */
const SMALLEST_REAL = 1.2e-38;

/** A vector the service cannot use: as a refused text, its item is skipped alone. */
export class InvalidVectorError extends Error {}

/**
 * The provider's vector at unit length, each component a `real` PostgreSQL accepts (smaller ones
 * are 0). Not finite, empty, all zero or longer than MAX_DIMENSIONS: InvalidVectorError.
 */
export function unitLength(vector: unknown): number[] {
  const invalid = (why: string) =>
    new InvalidVectorError(`Embedder: the provider answered a vector ${why}`);
  if (!Array.isArray(vector) || vector.length === 0 || vector.length > MAX_DIMENSIONS) {
    throw invalid(`that is not 1..${MAX_DIMENSIONS} numbers long`);
  }
  if (!vector.every((x) => typeof x === 'number' && Number.isFinite(x))) {
    throw invalid('holding something other than finite numbers');
  }
  // Scaled by the largest component first, so that squaring neither overflows nor vanishes.
  const largest = Math.max(...(vector as number[]).map(Math.abs));
  if (largest === 0) throw invalid('of zeros');
  const scaled = (vector as number[]).map((x) => x / largest);
  const norm = Math.sqrt(scaled.reduce((sum, x) => sum + x * x, 0));
  return scaled.map((x) => {
    const unit = x / norm;
    return Math.abs(unit) < SMALLEST_REAL ? 0 : unit;
  });
}
