import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import { poolOf, type SqlStep } from '../database/pg-pool';
import type { MemoryRow } from './dto/memory.dto';
import type { MemoryRole } from './entities/memory.entity';

export interface NewMemory {
  organizationId: string;
  endUserId: string;
  personalityId: string;
  role: MemoryRole;
  content: string;
  emotion: string | null;
  intensity: number | null;
  vocabularyVersion: string | null;
  createdAt: Date;
}

/** A memory as a reply's prompt recalls it. */
export interface RecalledMemory {
  role: MemoryRole;
  content: string;
  emotion: string | null;
}

const MEMORY_FIELDS = 9;

/**
 * The SQL of the memories table: as a client manages them (list, forget), as a personality
 * appends them, and as an erasure removes them.
 */
@Injectable()
export class MemoriesRepository {
  private readonly pool: Pool;

  constructor(@InjectDataSource() dataSource: DataSource) {
    this.pool = poolOf(dataSource);
  }

  async findEndUserId(organizationId: string, userId: string): Promise<string | null> {
    const { rows } = await this.pool.query<{ id: string }>(
      'SELECT id FROM end_users WHERE organization_id = $1 AND user_id = $2',
      [organizationId, userId],
    );
    return rows[0]?.id ?? null;
  }

  /** Newest first, `limit + 1` rows (the extra one tells whether more follow). */
  async findPage(
    endUserId: string,
    filter: { personalityId?: string; before?: string },
    limit: number,
  ): Promise<MemoryRow[]> {
    const { rows } = await this.pool.query<MemoryRow>(
      `SELECT id::text, personality_id, role, content, emotion, intensity, vocabulary_version,
              created_at
         FROM memories
        WHERE end_user_id = $1
          AND ($2::uuid IS NULL OR personality_id = $2)
          AND ($3::bigint IS NULL OR id < $3)
        ORDER BY id DESC
        LIMIT $4`,
      [endUserId, filter.personalityId ?? null, filter.before ?? null, limit + 1],
    );
    return rows;
  }

  /** Deletes the memory if it is this end user's, in this organization; true when it was. */
  async deleteForEndUser(organizationId: string, userId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `DELETE FROM memories m
        USING end_users e
        WHERE m.id = $3 AND m.end_user_id = e.id
          AND e.organization_id = $1 AND e.user_id = $2`,
      [organizationId, userId, id],
    );
    return rowCount === 1;
  }

  /**
   * A WITH entry (`memory_rows`) inserting the memories in the order given, for a statement that
   * writes them together with other modules' rows. Its text depends only on the number of
   * memories and `firstParam`, so a named prepared statement can carry it.
   */
  insertStep(firstParam: number, memories: NewMemory[]): SqlStep {
    const params: unknown[] = [];
    const tuples = memories.map((memory, index) => {
      params.push(
        memory.organizationId,
        memory.endUserId,
        memory.personalityId,
        memory.role,
        memory.content,
        memory.emotion,
        memory.intensity,
        memory.vocabularyVersion,
        memory.createdAt,
      );
      const base = firstParam + index * MEMORY_FIELDS;
      return `(${Array.from({ length: MEMORY_FIELDS }, (_, i) => `$${base + i}`).join(', ')})`;
    });
    return {
      sql: `memory_rows AS (
        INSERT INTO memories (organization_id, end_user_id, personality_id, role, content,
                              emotion, intensity, vocabulary_version, created_at)
        VALUES ${tuples.join(', ')})`,
      params,
    };
  }

  /** In the erasure's transaction: every memory of these end users. */
  async deleteForEndUsers(manager: EntityManager, endUserIds: string[]): Promise<void> {
    await manager.query('DELETE FROM memories WHERE end_user_id = ANY($1::uuid[])', [endUserIds]);
  }
}
