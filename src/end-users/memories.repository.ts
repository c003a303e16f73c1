import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { poolOf } from '../database/pg-pool';
import type { MemoryRow } from './dto/memory.dto';

/** The queries of an end user's memories as a client manages them (list, forget). */
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
}
