import { Cte, join, sql } from '../database/sql';
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

/**
 * A CTE inserting the memories in the order given, for the statement that writes them with
 * other modules' rows (the exchange of /v1/respond). Its rows are the new memories' ids and
 * roles. Its text depends only on the number of memories, so a named statement can carry it.
 */
export function memoriesInsertStep(memories: NewMemory[]): Cte<'id' | 'role'> {
  const tuples = memories.map(
    (memory) =>
      sql`(${memory.organizationId}::uuid, ${memory.endUserId}::uuid, ${memory.personalityId}::uuid,
           ${memory.role}, ${memory.content}, ${memory.emotion}, ${memory.intensity}::real,
           ${memory.vocabularyVersion}, ${memory.createdAt}::timestamptz)`,
  );
  return new Cte(
    'memory_rows',
    sql`INSERT INTO memories (organization_id, end_user_id, personality_id, role, content,
                              emotion, intensity, vocabulary_version, created_at)
        VALUES ${join(tuples)}
        RETURNING id, role`,
    ['id', 'role'],
  );
}
