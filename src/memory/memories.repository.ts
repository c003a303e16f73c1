import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { forgetEndUserAnswersStep } from '../idempotency/end-user-answers.step';
import { sql } from '../database/sql';
import type { MemoryRow } from './dto/memory.dto';
import { type Meaning, memoryRanking } from './memory-search';
import type { Row } from '../database/row';
import type { Memory } from './entities/memory.entity';
import {
  type ErasedEndUser,
  ErasesEndUsers,
  ErasureOrder,
} from '../common/erasure/erasure-participant';

/** A memory of the reply's recent history, as the engine is sent it. */
export type HistoryMemory = Row<Memory, 'role' | 'content' | 'emotion'>;

/** An older memory recalled into a reply, with its date (ISO 8601, rendered by the query). */
export type RecalledMemory = Row<Memory, 'role' | 'content'> & { created_at: string };

export type ScoredMemoryRow = MemoryRow & { score: number };

/**
 * The SQL of the memories table: as a client manages them (list, forget), and as an erasure
 * removes them. A reply appends them with memories.step.ts.
 */
@Injectable()
export class MemoriesRepository {
  constructor(private readonly database: Database) {}

  async findEndUserId(organizationId: string, userId: string): Promise<string | null> {
    const row = await this.database.row<{ id: string }>(
      sql`SELECT id FROM end_users WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
    );
    return row?.id ?? null;
  }

  /** Newest first, `limit + 1` rows (the extra one tells whether more follow). */
  findPage(
    endUserId: string,
    filter: { personalityId?: string; before?: string },
    limit: number,
  ): Promise<MemoryRow[]> {
    const personalityId = filter.personalityId ?? null;
    const before = filter.before ?? null;
    return this.database.rows<MemoryRow>(
      // Ordered by the column, m.id: the output's `id` is text, and '9' sorts after '12'.
      sql`SELECT m.id::text, m.personality_id, m.role, m.content, m.emotion, m.intensity,
                 m.vocabulary_version, m.created_at, m.safety, m.tool_calls
            FROM memories m
           WHERE m.end_user_id = ${endUserId}
             AND (${personalityId}::uuid IS NULL OR m.personality_id = ${personalityId})
             AND (${before}::bigint IS NULL OR m.id < ${before})
           ORDER BY m.id DESC
           LIMIT ${limit + 1}`,
    );
  }

  /**
   * The end user's memories most relevant to `text` (rankedMemories: the most words first, then
   * the rarest, then the newest), each searched in its personality's language (docs/memory.md);
   * with `meaning`, fused with the ranking by embeddings (memoryRanking).
   */
  search(
    organizationId: string,
    endUserId: string,
    text: string,
    personalityId: string | null,
    limit: number,
    meaning: Meaning | null,
  ): Promise<ScoredMemoryRow[]> {
    const ranking = memoryRanking(
      { organizationId, endUserId: sql`${endUserId}::uuid`, personalityId, text, limit },
      meaning,
    );
    return this.database.rows<ScoredMemoryRow>(
      sql`SELECT m.id::text, m.personality_id, m.role, m.content, m.emotion, m.intensity,
                 m.vocabulary_version, m.created_at, m.safety, r.score
            FROM (${ranking.rows}) r
            JOIN memories m ON m.id = r.id
           ORDER BY ${ranking.order}`,
    );
  }

  /**
   * Deletes the memory if it is this end user's, in this organization, and the facts the engine
   * learned from it (they are what the message said); true when there was one.
   */
  async deleteForEndUser(organizationId: string, userId: string, id: string): Promise<boolean> {
    const row = await this.database.row<{ deleted: number }>(
      sql`WITH doomed AS (
            SELECT m.id FROM memories m JOIN end_users e ON e.id = m.end_user_id
             WHERE m.id = ${id} AND e.organization_id = ${organizationId} AND e.user_id = ${userId}),
          learned AS (
            DELETE FROM end_user_facts
             WHERE memory_id IN (SELECT id FROM doomed) AND source = 'engine'),
          deleted AS (DELETE FROM memories WHERE id IN (SELECT id FROM doomed) RETURNING 1),
          -- A stored answer (a keyed respond) may hold the memory: it goes with it.
          ${forgetEndUserAnswersStep('forgotten_answers', organizationId, [userId], sql`EXISTS (SELECT 1 FROM doomed)`)}
          SELECT count(*)::int AS deleted FROM deleted`,
    );
    return row?.deleted === 1;
  }

  /**
   * Deletes up to `batchSize` memories older than their organization's retention at `now`;
   * answers how many. Only organizations with a retention are read (they are few), each through
   * memories_organization_created_idx; rows another instance is deleting are skipped.
   */
  deletePastRetention(now: Date, batchSize: number): Promise<number> {
    return this.database.count(
      sql`WITH doomed AS (
            SELECT m.id FROM organizations o
              JOIN memories m ON m.organization_id = o.id
                             AND m.created_at < ${now}::timestamptz - make_interval(days => o.memory_retention_days)
             WHERE o.memory_retention_days IS NOT NULL
             LIMIT ${batchSize}
               FOR UPDATE OF m SKIP LOCKED)
          DELETE FROM memories WHERE id IN (SELECT id FROM doomed)`,
    );
  }

  /** Erasure: every memory of these end users. */
  @ErasesEndUsers({
    order: ErasureOrder.DATA,
    tables: ['memory_terms', 'memory_embeddings', 'memories'],
  })
  async eraseEndUsers(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    const endUserIds = endUsers.map((endUser) => endUser.id);
    // Their terms and embeddings first, by their end user: the cascade from each memory would
    // look them up memory by memory.
    await this.database.rows(
      sql`DELETE FROM memory_terms WHERE end_user_id = ANY(${endUserIds}::uuid[])`,
      { manager },
    );
    await this.database.rows(
      sql`DELETE FROM memory_embeddings WHERE end_user_id = ANY(${endUserIds}::uuid[])`,
      { manager },
    );
    await this.database.rows(
      sql`DELETE FROM memories WHERE end_user_id = ANY(${endUserIds}::uuid[])`,
      { manager },
    );
  }
}
