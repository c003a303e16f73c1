import type { Client } from 'pg';
import { type Sql, sql } from '../../../src/database/sql';
import { MATCHED_SHARE, searchTerms } from '../../../src/end-users/memory-search';

/**
 * Rankings of one end user's memories with one personality for a message, over the memories a
 * reply could recall at the moment it was asked (ids below `bound`, the oldest memory of its
 * history): the service's own (its pieces of src/end-users/memory-search.ts, as findConversation
 * assembles them), and alternatives a bench can set beside it on the same memories. Each answers
 * the ids of the top `limit`, best first, ties to the newest as the service does.
 */
export interface RecallPool {
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

/** The service's: the share of the message's lexemes a memory holds (MATCHED_SHARE). */
export function serviceRanking(db: Client, pool: RecallPool): Promise<string[]> {
  return ids(
    db,
    sql`SELECT m.id::text AS id, ${MATCHED_SHARE} AS score
          FROM ${searchTerms(sql`'english'`, pool.message)} terms
          JOIN memories m ON m.end_user_id = ${pool.endUserId}
                         AND m.personality_id = ${pool.personalityId}
         WHERE m.search @@ terms.any_word AND m.id < ${pool.bound}::bigint
         ORDER BY score DESC, m.id DESC
         LIMIT ${pool.limit}`,
  );
}

/**
 * The same share, each lexeme weighted by its rarity among the pool (inverse document
 * frequency, ln((N + 1) / (df + 0.5))): a memory holding the one word of the message that few
 * memories hold outranks one holding a word that half of them hold. The document frequencies
 * come from the candidates themselves (every memory holding a lexeme is a candidate), so it needs
 * no other read than the service's, plus the pool's size.
 */
export function idfShareRanking(db: Client, pool: RecallPool): Promise<string[]> {
  return ids(
    db,
    sql`WITH terms AS MATERIALIZED ${searchTerms(sql`'english'`, pool.message)},
             candidates AS MATERIALIZED (
               SELECT m.id, m.search FROM memories m, terms
                WHERE m.end_user_id = ${pool.endUserId} AND m.personality_id = ${pool.personalityId}
                  AND m.id < ${pool.bound}::bigint AND m.search @@ terms.any_word),
             size AS (SELECT count(*) AS n FROM memories
                       WHERE end_user_id = ${pool.endUserId} AND personality_id = ${pool.personalityId}
                         AND id < ${pool.bound}::bigint),
             weights AS (
               SELECT part, ln((size.n + 1.0) / ((SELECT count(*) FROM candidates c WHERE c.search @@ part) + 0.5)) AS idf
                 FROM terms, size, unnest(terms.parts) part)
        SELECT c.id::text AS id,
               (SELECT sum(idf) FROM weights w WHERE c.search @@ w.part)
                 / (SELECT sum(idf) FROM weights) AS score
          FROM candidates c
         ORDER BY score DESC, c.id DESC
         LIMIT ${pool.limit}`,
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

/**
 * BM25 without term counts (a lexeme counts once, as it mostly occurs once in a chat message),
 * everything from the candidates the service already reads: rarity as idfShareRanking, and the
 * memory's length as its number of lexemes (`length(search)`, read from the tsvector's header)
 * against the candidates' average. Its cost is the service's (a `@@` per lexeme per candidate)
 * plus one more such pass for the document frequencies and a count of the pool.
 */
export function bm25LiteRanking(db: Client, pool: RecallPool): Promise<string[]> {
  return ids(
    db,
    sql`WITH terms AS MATERIALIZED ${searchTerms(sql`'english'`, pool.message)},
             candidates AS MATERIALIZED (
               SELECT m.id, m.search, length(m.search) AS dl FROM memories m, terms
                WHERE m.end_user_id = ${pool.endUserId} AND m.personality_id = ${pool.personalityId}
                  AND m.id < ${pool.bound}::bigint AND m.search @@ terms.any_word),
             size AS (SELECT count(*) AS n FROM memories
                       WHERE end_user_id = ${pool.endUserId} AND personality_id = ${pool.personalityId}
                         AND id < ${pool.bound}::bigint),
             stats AS (SELECT avg(dl) AS avgdl FROM candidates),
             weights AS (
               SELECT part, ln(1 + (size.n - df + 0.5) / (df + 0.5)) AS idf
                 FROM (SELECT part, (SELECT count(*) FROM candidates c WHERE c.search @@ part) AS df
                         FROM terms, unnest(terms.parts) part) d, size)
        SELECT c.id::text AS id,
               (SELECT sum(idf) FROM weights w WHERE c.search @@ w.part)
                 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * c.dl / stats.avgdl)) AS score
          FROM candidates c, stats
         ORDER BY score DESC, c.id DESC
         LIMIT ${pool.limit}`,
  );
}

/**
 * bm25LiteRanking over fewer candidates: only the memories holding one of the message's lexemes
 * that at most `share` of the pool holds (the rarest lexeme when none is that rare). The common
 * words of a message ("feel", "today", "work") then no longer make most of an end user's memories
 * candidates, each read from the heap and scored; they still count in a candidate's score.
 */
export function rareCandidatesRanking(share: number) {
  return (db: Client, pool: RecallPool): Promise<string[]> =>
    ids(
      db,
      sql`WITH terms AS MATERIALIZED ${searchTerms(sql`'english'`, pool.message)},
               size AS (SELECT count(*) AS n FROM memories
                         WHERE end_user_id = ${pool.endUserId} AND personality_id = ${pool.personalityId}
                           AND id < ${pool.bound}::bigint),
               df AS MATERIALIZED (
                 SELECT part, (SELECT count(*) FROM memories m
                                WHERE m.end_user_id = ${pool.endUserId}
                                  AND m.personality_id = ${pool.personalityId}
                                  AND m.id < ${pool.bound}::bigint AND m.search @@ part) AS df
                   FROM terms, unnest(terms.parts) part),
               rare AS (
                 SELECT part FROM df, size WHERE df.df <= ${share}::float8 * size.n
                 UNION
                 (SELECT part FROM df ORDER BY df LIMIT 1)),
               candidates AS MATERIALIZED (
                 SELECT m.id, m.search, length(m.search) AS dl FROM memories m
                  WHERE m.end_user_id = ${pool.endUserId} AND m.personality_id = ${pool.personalityId}
                    AND m.id < ${pool.bound}::bigint
                    AND m.search @@ (SELECT string_agg(part::text, ' | ')::tsquery FROM rare)),
               stats AS (SELECT avg(dl) AS avgdl FROM candidates),
               weights AS (SELECT part, ln(1 + (size.n - df + 0.5) / (df + 0.5)) AS idf FROM df, size)
          SELECT c.id::text AS id,
                 (SELECT sum(idf) FROM weights w WHERE c.search @@ w.part)
                   * 2.2 / (1 + 1.2 * (0.25 + 0.75 * c.dl / stats.avgdl)) AS score
            FROM candidates c, stats
           ORDER BY score DESC, c.id DESC
           LIMIT ${pool.limit}`,
    );
}

/**
 * The same idea without counting anything per query: each lexeme's frequency is the table's, as
 * ANALYZE keeps it for the tsvector column (`pg_stats.most_common_elems` and their frequencies;
 * a lexeme not among them is rarer than the rarest listed). Candidates hold a lexeme of
 * frequency at most `share` (the rarest lexeme when none is); the score is bm25LiteRanking's with
 * these frequencies as the rarity. What a service could run with the statistics cached.
 */
export function statsRareRanking(share: number) {
  return (db: Client, pool: RecallPool): Promise<string[]> =>
    ids(
      db,
      sql`WITH common AS (
                 SELECT u.lexeme, u.freq
                   FROM pg_stats s,
                        unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS u(lexeme, freq)
                  WHERE s.schemaname = 'public' AND s.tablename = 'memories' AND s.attname = 'search'
                    AND u.lexeme IS NOT NULL),
               floor AS (SELECT coalesce(min(freq) / 2, 0.0001) AS freq FROM common),
               lexemes AS MATERIALIZED (
                 SELECT ('''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || '''')::tsquery AS part,
                        coalesce(c.freq, floor.freq) AS freq
                   FROM unnest(tsvector_to_array(to_tsvector('english', ${pool.message}))) l
                   CROSS JOIN floor
                   LEFT JOIN common c ON c.lexeme = l),
               rare AS (
                 SELECT part FROM lexemes WHERE freq <= ${share}::float8
                 UNION
                 (SELECT part FROM lexemes ORDER BY freq LIMIT 1)),
               candidates AS MATERIALIZED (
                 SELECT m.id, m.search, length(m.search) AS dl FROM memories m
                  WHERE m.end_user_id = ${pool.endUserId} AND m.personality_id = ${pool.personalityId}
                    AND m.id < ${pool.bound}::bigint
                    AND m.search @@ (SELECT string_agg(part::text, ' | ')::tsquery FROM rare)),
               stats AS (SELECT avg(dl) AS avgdl FROM candidates)
          SELECT c.id::text AS id,
                 (SELECT sum(-ln(freq)) FROM lexemes w WHERE c.search @@ w.part)
                   * 2.2 / (1 + 1.2 * (0.25 + 0.75 * c.dl / stats.avgdl)) AS score
            FROM candidates c, stats
           ORDER BY score DESC, c.id DESC
           LIMIT ${pool.limit}`,
    );
}
