import { Cte, join, type Source, sql } from '../database/sql';
import type { FactSource } from './entities/fact.entity';

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

/** A fact as an import writes it: content already normalised, its message already mapped. */
export interface NewFact {
  content: string;
  key: string;
  source: FactSource;
  /** The id of the end user's memory it was learned from (a new id), or null. */
  memoryId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * A CTE inserting facts of an end user as they are (an import, into an end user created in the
 * same transaction, so no fact lock is needed: nobody else can see the user yet). The caller
 * has checked that no two share a key and that they are within MEMORY_FACTS_LIMIT. Its rows are
 * the new facts' ids.
 */
export function factsInsertStep(
  target: { organizationId: string; endUserId: string },
  facts: NewFact[],
): Cte<'id'> {
  const values = facts.map(
    (fact, index) =>
      sql`(${index}::int, ${fact.content}, ${fact.key}, ${fact.source}, ${fact.memoryId}::bigint,
           ${fact.createdAt}::timestamptz, ${fact.updatedAt}::timestamptz)`,
  );
  return new Cte(
    'new_facts',
    sql`INSERT INTO end_user_facts
          (organization_id, end_user_id, content, content_key, source, memory_id, created_at,
           updated_at)
        SELECT ${target.organizationId}::uuid, ${target.endUserId}::uuid, v.content, v.key,
               v.source, v.memory_id, v.created_at, GREATEST(v.created_at, v.updated_at)
          FROM (VALUES ${join(values)})
               AS v(ord, content, key, source, memory_id, created_at, updated_at)
         ORDER BY v.ord
        RETURNING id`,
    ['id'],
  );
}
