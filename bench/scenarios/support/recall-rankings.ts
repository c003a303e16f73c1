import type { Client } from 'pg';
import { type Sql, sql } from '../../../src/database/sql';
import { rankedMemories } from '../../../src/memory/memory-search';

/**
 * Rankings of one end user's memories with one personality for a message, over the memories a
 * reply could recall at the moment it was asked (ids below `bound`, the oldest memory of its
 * history): the service's own (rankedMemories, as findConversation calls it), and full Okapi BM25
 * beside it on the same memories as a reference. Each answers the ids of the top `limit`, best
 * first.
 */
export interface RecallPool {
  organizationId: string;
  endUserId: string;
  personalityId: string;
  /** Memories with an id below this one: older than the reply's history. */
  bound: string;
  message: string;
  limit: number;
}

async function ids(db: Client, statement: Sql): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(statement.text, [...statement.values]);
  return rows.map((row) => row.id);
}

/** The service's ranking (src/memory/memory-search.ts), the statement a reply runs. */
export function serviceRanking(db: Client, pool: RecallPool): Promise<string[]> {
  return ids(
    db,
    sql`SELECT r.id::text AS id FROM (${rankedMemories({
      organizationId: pool.organizationId,
      endUserId: sql`${pool.endUserId}::uuid`,
      personalityId: pool.personalityId,
      before: sql`${pool.bound}::bigint`,
      text: pool.message,
      limit: pool.limit,
    })}) r
    ORDER BY r.share DESC, r.relevance DESC, r.id DESC`,
  );
}

/**
 * Okapi BM25 (k1 1.2, b 0.75) over the lexemes: rarity as above, each lexeme's count in the
 * memory (its positions in the tsvector) saturating, and shorter memories favoured for the same
 * counts. Heavier: it reads every pool memory's length.
 */
export function bm25Ranking(db: Client, pool: RecallPool): Promise<string[]> {
  return ids(
    db,
    sql`WITH query AS (SELECT unnest(tsvector_to_array(to_tsvector('english', ${pool.message}))) AS lexeme),
             pool AS MATERIALIZED (
               SELECT m.id, m.search,
                      (SELECT coalesce(sum(array_length(u.positions, 1)), 0) FROM unnest(m.search) u) AS dl
                 FROM memories m
                WHERE m.end_user_id = ${pool.endUserId} AND m.personality_id = ${pool.personalityId}
                  AND m.id < ${pool.bound}::bigint),
             stats AS (SELECT count(*) AS n, avg(dl) AS avgdl FROM pool),
             tf AS (SELECT pool.id, u.lexeme, array_length(u.positions, 1) AS tf, pool.dl
                      FROM pool, unnest(pool.search) u
                     WHERE u.lexeme IN (SELECT lexeme FROM query)),
             df AS (SELECT lexeme, count(*) AS df FROM tf GROUP BY lexeme)
        SELECT tf.id::text AS id,
               sum(ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5))
                   * tf.tf * 2.2 / (tf.tf + 1.2 * (0.25 + 0.75 * tf.dl / stats.avgdl))) AS score
          FROM tf JOIN df USING (lexeme), stats
         GROUP BY tf.id
         ORDER BY score DESC, tf.id DESC
         LIMIT ${pool.limit}`,
  );
}
