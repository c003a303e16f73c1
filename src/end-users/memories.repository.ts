import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { sql } from '../database/sql';
import type { MemoryRow } from './dto/memory.dto';
import type { MemoryRole } from './entities/memory.entity';

/** A memory as a reply's prompt recalls it. */
export interface RecalledMemory {
  role: MemoryRole;
  content: string;
  emotion: string | null;
}

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
      sql`SELECT id::text, personality_id, role, content, emotion, intensity, vocabulary_version,
                 created_at
            FROM memories
           WHERE end_user_id = ${endUserId}
             AND (${personalityId}::uuid IS NULL OR personality_id = ${personalityId})
             AND (${before}::bigint IS NULL OR id < ${before})
           ORDER BY id DESC
           LIMIT ${limit + 1}`,
    );
  }

  /** Deletes the memory if it is this end user's, in this organization; true when it was. */
  async deleteForEndUser(organizationId: string, userId: string, id: string): Promise<boolean> {
    const deleted = await this.database.count(
      sql`DELETE FROM memories m
           USING end_users e
           WHERE m.id = ${id} AND m.end_user_id = e.id
             AND e.organization_id = ${organizationId} AND e.user_id = ${userId}`,
    );
    return deleted === 1;
  }

  /** In the erasure's transaction: every memory of these end users. */
  async deleteForEndUsers(manager: EntityManager, endUserIds: string[]): Promise<void> {
    await this.database.rows(
      sql`DELETE FROM memories WHERE end_user_id = ANY(${endUserIds}::uuid[])`,
      { manager },
    );
  }
}
