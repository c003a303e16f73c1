import { Injectable } from '@nestjs/common';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import { type MemoryDto, type ScoredMemoryDto, toMemoryResponse } from './dto/memory.dto';
import { Embedder } from '../embeddings/embedder';
import { IdempotencyService } from '../idempotency/idempotency.service';
import { MemoriesRepository } from './memories.repository';
import { quotationsOf } from './memory-quote';

/**
 * What the personalities remember of an end user, as the client sees and prunes it. A forgotten
 * memory is deleted: the engine, the export and subject access all read the same rows.
 */
@Injectable()
export class MemoriesService {
  constructor(
    private readonly memories: MemoriesRepository,
    private readonly embedder: Embedder,
    private readonly idempotency: IdempotencyService,
  ) {}

  async list(
    organizationId: string,
    userId: string,
    options: { personalityId?: string; startingAfter?: string; limit: number },
  ): Promise<Page<MemoryDto>> {
    const endUserId = await this.memories.findEndUserId(organizationId, userId);
    if (!endUserId) throw AppError.notFound('End user');
    const rows = await this.memories.findPage(
      endUserId,
      { personalityId: options.personalityId, before: options.startingAfter },
      options.limit,
    );
    return toPage(rows, options.limit, toMemoryResponse);
  }

  /**
   * Full-text search of the end user's memories, fused with the ranking by meaning when
   * embeddings are on and the question's embedding came in time (docs/memory.md); not paged.
   * The end user is found first: asked alongside, the question went to the provider (paid, and
   * read there) for an end user of no one, or of another organization (found by review).
   */
  async search(
    organizationId: string,
    userId: string,
    options: { q: string; personalityId?: string; limit: number },
  ): Promise<Page<ScoredMemoryDto>> {
    const endUserId = await this.memories.findEndUserId(organizationId, userId);
    if (!endUserId) throw AppError.notFound('End user');
    const meaning = await this.embedder.embedQuery(organizationId, options.q);
    const rows = await this.memories.search(
      organizationId,
      endUserId,
      options.q,
      options.personalityId ?? null,
      options.limit,
      meaning,
    );
    return {
      data: rows.map((row) => ({
        ...toMemoryResponse(row),
        score: Math.round(row.score * 1000) / 1000,
      })),
      has_more: false,
    };
  }

  /**
   * Deletes the memory, and with a message of the end user the personality's replies that quoted
   * it (memory-quote.ts): forgotten for good, its words included.
   */
  async forget(organizationId: string, userId: string, id: string): Promise<void> {
    const deleted = await this.memories.deleteForEndUser(organizationId, userId, id, (memory) =>
      memory.role === 'user' ? quotationsOf(memory.content) : [],
    );
    if (!deleted) throw AppError.notFound('Memory');
    await this.idempotency.forgetAfterDeletion(organizationId, [userId]);
  }
}
