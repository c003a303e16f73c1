import { Inject, Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import type { EntityManager } from 'typeorm';
import { Caches } from '../common/cache/caches';
import type { SharedCache } from '../common/cache/shared-cache';
import { AppError } from '../common/errors/app-error';
import { isStatementTimeout } from '../common/errors/statement-timeout';
import { type Page, toPage } from '../common/pagination/pagination';
import {
  ReadsForReplies,
  type ReplyContribution,
  type ReplyParticipant,
  type ReplyTurn,
} from '../common/reply/reply-participant';
import { Clock } from '../common/time/clock';
import { secondsToNextUtcDay, utcDay } from '../common/time/utc-day';
import { type KnowledgeConfig, knowledgeConfig } from '../config/knowledge.config';
import { type MemoryConfig, memoryConfig } from '../config/memory.config';
import { Database, isPoolTimeout } from '../database/database';
import { Embedder } from '../embeddings/embedder';
import { MetricsService } from '../metrics/metrics.service';
import { DEFAULT_LANGUAGE, searchConfigOf } from '../personalities/languages';
import { chunkText } from './chunker';
import { KnowledgeWriteTurns } from './knowledge-write-turns';
import {
  type CreateKnowledgeDto,
  DOCUMENT_MAX_BYTES,
  type KnowledgeDocumentDto,
  type KnowledgeDocumentWithContentDto,
  type KnowledgeSearchResultDto,
  type UpdateKnowledgeDto,
} from './dto/knowledge.dto';
import {
  type DocumentText,
  type KnowledgeDocumentRow,
  type KnowledgeDocumentWithContentRow,
  type KnowledgeHit,
  type KnowledgeDrawers,
  KnowledgeRepository,
} from './knowledge.repository';

/**
 * How long an instance keeps which personalities draw on an organization's documents; every
 * write of a document drops it on every instance before it answers (without Redis, others keep
 * it this long).
 */
const DRAWERS_CACHE_MS = 5_000;

/** Whether documents of the organization are attached to the personality. */
function drawsOn(drawers: KnowledgeDrawers, personalityId: string): boolean {
  // The database answers ids in lower case; a request may spell one in upper case.
  return drawers.all || drawers.personalityIds.includes(personalityId.toLowerCase());
}

/** A chunk a reply was given, and what its citation names. */
export type RecalledChunk = Omit<KnowledgeHit, 'score'>;

function toDto(row: KnowledgeDocumentRow): KnowledgeDocumentDto {
  return {
    id: row.id,
    title: row.title,
    language: row.language,
    personality_ids: row.personality_ids,
    bytes: row.bytes,
    chunks: row.chunks,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

function withContent(row: KnowledgeDocumentWithContentRow): KnowledgeDocumentWithContentDto {
  return { ...toDto(row), content: row.content };
}

/** The content's bytes as stored; 413 past DOCUMENT_MAX_BYTES. */
function contentBytes(content: string): number {
  const bytes = Buffer.byteLength(content, 'utf8');
  if (bytes > DOCUMENT_MAX_BYTES) {
    throw new AppError(
      'payload_too_large',
      `The document's content exceeds ${DOCUMENT_MAX_BYTES} bytes`,
    );
  }
  return bytes;
}

/**
 * The content as stored and chunked. Chunked in the write's turn (KnowledgeWriteTurns), not
 * before: chunking 1 MiB takes the event loop for up to 0.1 s, and a dozen writes of one
 * organization chunked at once held every other request of the instance for seconds (found by
 * review); in turn, an organization chunks one document at a time, and a large one in the
 * instance's heavy slot.
 */
function documentText(content: string, bytes: number): DocumentText {
  return { content, bytes, chunks: chunkText(content) };
}

/**
 * The business's documents (docs/knowledge.md): stored, chunked, searched and recalled. A reply
 * participant: every reply reads the passages of its personality's documents for the message.
 */
@Injectable()
@ReadsForReplies('knowledge')
export class KnowledgeService implements ReplyParticipant {
  private readonly recallTimeouts: { inc(): void };
  /** Per organization: the personalities its documents are attached to (KnowledgeDrawers). */
  private readonly drawers: SharedCache<KnowledgeDrawers>;

  constructor(
    private readonly repository: KnowledgeRepository,
    private readonly writes: KnowledgeWriteTurns,
    private readonly database: Database,
    private readonly clock: Clock,
    @Inject(knowledgeConfig.KEY) private readonly config: KnowledgeConfig,
    @Inject(memoryConfig.KEY) private readonly memory: MemoryConfig,
    private readonly logger: PinoLogger,
    private readonly embedder: Embedder,
    metrics: MetricsService,
    caches: Caches,
  ) {
    this.logger.setContext(KnowledgeService.name);
    this.recallTimeouts = metrics.counter({
      name: 'knowledge_recall_timeouts_total',
      help: 'Replies that went on without knowledge: retrieval ran past MEMORY_RECALL_TIMEOUT_MS',
    });
    this.drawers = caches.shared({
      channel: 'knowledge:changed',
      ttlMs: DRAWERS_CACHE_MS,
      maxEntries: 100_000,
    });
  }

  /**
   * Stored, chunked and attached in one transaction: searchable once it answers. `clientGone`:
   * a write still waiting for its turn when it aborts is dropped (KnowledgeWriteTurns).
   */
  async create(
    organizationId: string,
    dto: CreateKnowledgeDto,
    clientGone?: AbortSignal,
  ): Promise<KnowledgeDocumentDto> {
    const bytes = contentBytes(dto.content);
    const language = dto.language ?? DEFAULT_LANGUAGE;
    const searchConfig = searchConfigOf(language);
    // Read back in the transaction: a DELETE right after the commit cannot take the answer away.
    const row = await this.writes.inTurn(
      organizationId,
      () => {
        const text = documentText(dto.content, bytes);
        return this.database.transaction(async (manager) => {
          await this.admit(manager, organizationId, null, text.bytes);
          await this.countWritten(manager, organizationId, text.bytes);
          const id = await this.repository.insert(manager, {
            organizationId,
            title: dto.title,
            language,
            searchConfig,
            text,
            at: this.clock.now(),
          });
          await this.attach(manager, organizationId, id, dto.personality_ids ?? null);
          await this.repository.writeChunks(manager, organizationId, id, searchConfig, text.chunks);
          return this.repository.find(organizationId, id, manager);
        });
      },
      bytes,
      clientGone,
    );
    await this.forgetDrawers(organizationId);
    return toDto(row!);
  }

  async list(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<Page<KnowledgeDocumentDto>> {
    const rows = await this.repository.findPage(organizationId, limit, startingAfter);
    return toPage(rows, limit, toDto);
  }

  async get(organizationId: string, id: string): Promise<KnowledgeDocumentWithContentDto> {
    const row = await this.repository.find(organizationId, id);
    if (!row) throw AppError.notFound('Document');
    return withContent(row);
  }

  /**
   * New content is chunked again in the same transaction: searchable once it answers. A chunk of
   * the same text as before is kept with its embedding (replaceChunks): written anew, each PATCH
   * of a large document had the embedding worker embed all of it again.
   */
  async update(
    organizationId: string,
    id: string,
    dto: UpdateKnowledgeDto,
    clientGone?: AbortSignal,
  ): Promise<KnowledgeDocumentDto> {
    const { content } = dto;
    const bytes = content === undefined ? undefined : contentBytes(content);
    // New content deletes the old one's chunks and postings too: a large write either way.
    const weight = async () =>
      bytes === undefined
        ? 0
        : Math.max(bytes, await this.repository.bytesHeld(organizationId, id));
    // In turn even without content: the document's row waits for a content write of it.
    const row = await this.writes.inTurn(
      organizationId,
      () => {
        const text =
          content === undefined || bytes === undefined ? undefined : documentText(content, bytes);
        return this.database.transaction(async (manager) => {
          if (text) await this.admit(manager, organizationId, id, text.bytes);
          const updated = await this.repository.update(manager, organizationId, id, {
            title: dto.title,
            text,
            at: this.clock.now(),
          });
          if (!updated) return undefined;
          if (dto.personality_ids !== undefined) {
            await this.attach(manager, organizationId, id, dto.personality_ids);
          }
          if (text && updated.content_changed) {
            const written = await this.repository.newChunkBytes(
              manager,
              organizationId,
              id,
              text.chunks,
            );
            await this.countWritten(manager, organizationId, written);
            await this.repository.replaceChunks(
              manager,
              organizationId,
              id,
              updated.search_config,
              text.chunks,
            );
          }
          return this.repository.find(organizationId, id, manager);
        });
      },
      weight,
      clientGone,
    );
    if (!row) throw AppError.notFound('Document');
    await this.forgetDrawers(organizationId);
    return toDto(row);
  }

  async remove(organizationId: string, id: string, clientGone?: AbortSignal): Promise<void> {
    // A large document's chunks and postings go in one statement: a large write.
    const removed = await this.writes.inTurn(
      organizationId,
      () => this.repository.remove(organizationId, id),
      () => this.repository.bytesHeld(organizationId, id),
      clientGone,
    );
    if (!removed) throw AppError.notFound('Document');
    await this.forgetDrawers(organizationId);
  }

  /** A personality of another organization finds nothing, as one that does not exist. */
  async search(
    organizationId: string,
    query: { q: string; personalityId?: string; limit: number },
  ): Promise<KnowledgeSearchResultDto> {
    const { personalityId } = query;
    // Whether the personality is the organization's (the documents attached to all would match
    // any id), before the question goes to the provider: asked alongside, it went (paid, and
    // read there) for a personality of no one or of another organization (found by review).
    if (
      personalityId !== undefined &&
      (await this.repository.countPersonalities(organizationId, [personalityId])) === 0
    ) {
      return { data: [], has_more: false };
    }
    // Null when off, slow or failing: ranked by words alone.
    const meaning = await this.embedder.embedQuery(organizationId, query.q);
    const hits = await this.repository.search(
      organizationId,
      query.personalityId ?? null,
      query.q,
      query.limit,
      meaning,
    );
    return { data: hits, has_more: false };
  }

  /** Only the organization's documents attached to the personality: an unknown one finds none. */
  async readReplyContext(turn: ReplyTurn): Promise<ReplyContribution> {
    return { knowledge: await this.recall(turn.organizationId, turn.personalityId, turn.message) };
  }

  /**
   * The chunks of the personality's documents most relevant to a message, for a reply: at most
   * KNOWLEDGE_RECALL_LIMIT, within MEMORY_RECALL_TIMEOUT_MS of database time (past it none,
   * logged and counted, contract §29).
   */
  async recall(
    organizationId: string,
    personalityId: string,
    message: string,
  ): Promise<RecalledChunk[]> {
    const { recallLimit } = this.config;
    if (recallLimit === 0) return [];
    // Most organizations hold no documents for most personalities: then no embedding, no query.
    const known = this.drawers.peek(organizationId);
    if (known && !drawsOn(known, personalityId)) return [];
    // Null when off, slow or failing: retrieval by words alone (EMBEDDINGS_QUERY_TIMEOUT_MS).
    // Asked at once: the reply's memory recall asks for the same message's, and they share it.
    const embedding = this.embedder.embedQuery(organizationId, message);
    const timeoutMs = this.memory.recallTimeoutMs;
    try {
      // Who draws on the documents is read within the same budget as the chunks.
      const drawers =
        known ??
        (await this.drawers.get(organizationId, () =>
          this.repository.drawers(organizationId, timeoutMs),
        ));
      if (!drawsOn(drawers, personalityId)) return [];
      const hits = await this.repository.recall(
        organizationId,
        personalityId,
        message,
        recallLimit,
        await embedding,
        timeoutMs,
      );
      return hits.map(({ document_id, title, chunk_index, text }) => ({
        document_id,
        title,
        chunk_index,
        text,
      }));
    } catch (error) {
      if (isStatementTimeout(error)) {
        this.recallTimeouts.inc();
        this.logger.warn(
          { organizationId, personalityId, timeoutMs },
          'knowledge retrieval ran past MEMORY_RECALL_TIMEOUT_MS: replying without knowledge',
        );
      } else if (isPoolTimeout(error)) {
        // Its bounded sessions all busy (Database#rowsWithin): the database is slow.
        this.logger.warn(
          { organizationId, personalityId },
          'no session for knowledge retrieval in time: replying without knowledge',
        );
      } else {
        throw error;
      }
      return [];
    }
  }

  /**
   * After a write has committed: every instance reads the organization's drawers afresh before
   * this answers, so the next reply anywhere draws on a document just uploaded or attached.
   */
  private forgetDrawers(organizationId: string): Promise<void> {
    return this.drawers.invalidate(organizationId, { confirmed: true });
  }

  /**
   * 409 when the organization's documents would hold more than KNOWLEDGE_MAX_BYTES, or be more
   * than KNOWLEDGE_MAX_DOCUMENTS (a new one: `replacing` null).
   */
  private async admit(
    manager: EntityManager,
    organizationId: string,
    replacing: string | null,
    bytes: number,
  ): Promise<void> {
    await this.repository.lockOrganization(manager, organizationId);
    const held = await this.repository.held(manager, organizationId, replacing);
    // A PATCH of a document that is not there is a 404, whatever its content would hold.
    if (replacing !== null && !held.replaced) throw AppError.notFound('Document');
    if (replacing === null && held.documents + 1 > this.config.maxDocuments) {
      throw new AppError(
        'knowledge_limit_reached',
        `The organization would hold more than KNOWLEDGE_MAX_DOCUMENTS (${this.config.maxDocuments} documents)`,
      );
    }
    if (held.bytes + bytes > this.config.maxBytes) {
      throw new AppError(
        'knowledge_limit_reached',
        `The organization's documents would hold more than KNOWLEDGE_MAX_BYTES (${this.config.maxBytes} bytes)`,
      );
    }
  }

  /**
   * Counts text chunked anew (a new document's, or the chunks a PATCH did not keep) into the
   * organization's UTC day: 429 `rate_limited` (Retry-After: the next UTC midnight) once it would
   * pass KNOWLEDGE_DAILY_BYTES; 409 for more than a whole day's, which no day takes. Within the
   * organization's lock, as admit: concurrent writes cannot both take the day's last bytes.
   */
  private async countWritten(
    manager: EntityManager,
    organizationId: string,
    bytes: number,
  ): Promise<void> {
    // Nothing new (chunks reordered, or dropped): nothing to count, whatever the day holds.
    if (bytes === 0) return;
    if (bytes > this.config.dailyBytes) {
      throw new AppError(
        'knowledge_limit_reached',
        `The document's new text takes more than KNOWLEDGE_DAILY_BYTES (${this.config.dailyBytes} bytes), what the organization may write in a day`,
      );
    }
    const now = this.clock.now();
    const written = await this.repository.countWritten(
      manager,
      organizationId,
      utcDay(now),
      bytes,
      this.config.dailyBytes,
    );
    if (written !== null) return;
    throw new AppError(
      'rate_limited',
      `The organization's documents would take more than KNOWLEDGE_DAILY_BYTES (${this.config.dailyBytes} bytes) of new content this UTC day; retry after midnight UTC`,
      { headers: { 'Retry-After': String(secondsToNextUtcDay(now.getTime())) } },
    );
  }

  /**
   * 404 for a personality that is not the organization's: an upload's form checks it before its
   * page is converted (KnowledgeUploadInterceptor), and the write checks again, locking them.
   */
  async assertPersonalities(organizationId: string, ids: string[] | undefined): Promise<void> {
    if (!ids || ids.length === 0) return;
    if ((await this.repository.countPersonalities(organizationId, ids)) !== ids.length) {
      throw AppError.notFound('Personality');
    }
  }

  /** 404 for a personality that is not the organization's, as a reply to it answers. */
  private async attach(
    manager: EntityManager,
    organizationId: string,
    id: string,
    personalityIds: string[] | null,
  ): Promise<void> {
    if (personalityIds !== null && personalityIds.length > 0) {
      const found = await this.repository.lockPersonalities(
        manager,
        organizationId,
        personalityIds,
      );
      if (found !== personalityIds.length) throw AppError.notFound('Personality');
    }
    await this.repository.attach(manager, organizationId, id, personalityIds);
  }
}
