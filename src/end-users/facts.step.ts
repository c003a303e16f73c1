import { Cte, join, type Source, sql } from '../database/sql';

export interface LearnedFacts {
  organizationId: string;
  endUserId: string;
  /** Normalised contents and their keys, without repeats. */
  facts: Array<{ content: string; key: string }>;
  /** How many more facts the end user may hold (MEMORY_FACTS_LIMIT minus what they hold). */
  room: number;
  at: Date;
}

/**
 * A CTE storing the facts a reply learned, in the statement that stores the exchange: each
 * points at the user's message (the row of `memories` whose role is `user`). A fact the end user
 * already holds (case and white space aside) is not stored again, and no more than `room` are:
 * past the limit learned facts are dropped, never an error. The caller holds the end user's
 * fact lock (FactsRepository.lockForFacts) in the same transaction.
 */
export function learnedFactsStep(memories: Source<'id' | 'role'>, learned: LearnedFacts): Cte {
  const values = learned.facts.map(
    (fact, index) => sql`(${index}::int, ${fact.content}, ${fact.key})`,
  );
  return new Cte(
    'learned_facts',
    sql`INSERT INTO end_user_facts
          (organization_id, end_user_id, content, content_key, source, memory_id, created_at,
           updated_at)
        SELECT ${learned.organizationId}::uuid, ${learned.endUserId}::uuid, v.content, v.key,
               'engine', (SELECT id FROM ${memories.ref} WHERE role = 'user'),
               ${learned.at}::timestamptz, ${learned.at}::timestamptz
          FROM (VALUES ${join(values)}) AS v(ord, content, key)
         WHERE NOT EXISTS (SELECT 1 FROM end_user_facts f
                            WHERE f.end_user_id = ${learned.endUserId}::uuid AND f.content_key = v.key)
         ORDER BY v.ord
         LIMIT ${learned.room}
        ON CONFLICT (end_user_id, content_key) DO NOTHING`,
  );
}
