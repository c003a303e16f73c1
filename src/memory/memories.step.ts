import { Cte, join, sql } from '../database/sql';
import type { StoredVerdict } from '../common/reply/reply-store';
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
  /** The safety verdict of the message or the reply (docs/safety.md). */
  safety: StoredVerdict | null;
  /** A reply's tool calls (ToolCallRecord, contract §26); left out or null: none. */
  toolCalls?: readonly unknown[] | null;
}

/**
 * A CTE inserting the memories in the order given, with their full-text lexemes in their
 * personality's language as it is when the statement runs, for the
 * statement that writes them with other modules' rows (the exchange of /v1/respond, an import).
 * Its rows are the new memories' ids and roles, in that order of ids. Its text depends only on
 * the number of memories, so a named statement can carry it.
 */
export function memoriesInsertStep(
  memories: NewMemory[],
  name = 'memory_rows',
): Cte<'id' | 'role'> {
  const tuples = memories.map(
    (memory, index) =>
      sql`(${index}::int, ${memory.organizationId}::uuid, ${memory.endUserId}::uuid,
           ${memory.personalityId}::uuid, ${memory.role}, ${memory.content}, ${memory.emotion},
           ${memory.intensity}::real, ${memory.vocabularyVersion}, ${memory.createdAt}::timestamptz,
           ${memory.safety === null ? null : JSON.stringify(memory.safety)}::jsonb,
           ${memory.toolCalls ? JSON.stringify(memory.toolCalls) : null}::jsonb)`,
  );
  return new Cte(
    name,
    sql`INSERT INTO memories (organization_id, end_user_id, personality_id, role, content,
                              emotion, intensity, vocabulary_version, created_at, safety,
                              tool_calls, search)
        SELECT v.organization_id, v.end_user_id, v.personality_id, v.role, v.content, v.emotion,
               v.intensity, v.vocabulary_version, v.created_at, v.safety, v.tool_calls,
               to_tsvector(coalesce(p.search_config, 'simple')::regconfig, v.content)
          FROM (VALUES ${join(tuples)})
               AS v(ord, organization_id, end_user_id, personality_id, role, content, emotion,
                    intensity, vocabulary_version, created_at, safety, tool_calls)
          -- Outer: a personality deleted since the reply began fails the memories' foreign key
          -- and the whole statement with it; an inner join would drop its memories silently
          -- and store the rest (the month's relationship, the tokens) as if they were there.
          LEFT JOIN personalities p ON p.id = v.personality_id
         ORDER BY v.ord
        RETURNING id, role`,
    ['id', 'role'],
  );
}
