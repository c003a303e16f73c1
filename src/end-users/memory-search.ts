import { raw, type Sql, sql } from '../database/sql';

/** The memories a search ranks: one end user's, with one personality or all of the organization's. */
export interface MemoryPool {
  organizationId: string;
  /** The end user's internal id, as SQL (a parameter, or the column of an outer query). */
  endUserId: Sql;
  personalityId: string | null;
  /** Only memories older than this id, as SQL (a reply's recall skips its history); none: all. */
  before?: Sql;
  text: string;
  limit: number;
}

/**
 * A lexeme held by more than this share of all memories (PostgreSQL's own statistics of the
 * column, `pg_stats.most_common_elems`) is common: "feel", "today", "like". Common lexemes find
 * candidates among the end user's latest RECENT_WINDOW memories only; every other lexeme finds
 * every memory that holds it, through the search index.
 */
const COMMON_SHARE = 0.01;
const RECENT_WINDOW = 200;

/**
 * Okapi BM25's length normalisation with its usual constants (k1 1.2: how fast a lexeme's weight
 * saturates; b 0.75: how much length counts), a lexeme counting once per memory.
 */
const BM25_LENGTH = raw('2.2 / (1 + 1.2 * (0.25 + 0.75 * c.lexemes / average.lexemes))');

/**
 * The `limit` memories of the pool most relevant to `text` (docs/memory.md): rows `(id, share,
 * relevance)`, best first. A memory holding any lexeme of the text qualifies; one holding more of
 * them ranks higher (`share`, 0..1); among memories holding as many, BM25 decides (a lexeme few
 * memories hold weighs more than one many hold, a short memory more than a long one holding the
 * same), then the newest. Every memory is matched in its personality's language.
 *
 * The cost is bounded whatever the end user holds: the candidates are the memories holding a
 * lexeme that is not common, found through the GIN index, and the latest RECENT_WINDOW memories
 * holding any lexeme. Document frequencies are counted over the candidates (exact for the rarer
 * lexemes, whose every holder is one; a sample of the recent ones for the common).
 */
export function rankedMemories(pool: MemoryPool): Sql {
  const personality = sql`(${pool.personalityId}::uuid IS NULL OR p.id = ${pool.personalityId}::uuid)`;
  const older = (alias: string) =>
    pool.before ? sql`AND ${raw(alias)}.id < ${pool.before}` : sql``;
  return sql`
    WITH common AS MATERIALIZED (
           SELECT e.lexeme
             FROM pg_stats s,
                  unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS e(lexeme, share)
            WHERE s.schemaname = current_schema() AND s.tablename = 'memories'
              AND s.attname = 'search' AND e.share > ${COMMON_SHARE}),
         lexemes AS MATERIALIZED (
           SELECT c.search_config, l.lexeme,
                  ('''' || replace(replace(l.lexeme, '\\', '\\\\'), '''', '''''') || '''')::tsquery AS part,
                  l.lexeme IN (SELECT lexeme FROM common) AS common
             FROM (SELECT DISTINCT p.search_config FROM personalities p
                    WHERE p.organization_id = ${pool.organizationId} AND ${personality}) c
            CROSS JOIN LATERAL
                  unnest(tsvector_to_array(to_tsvector(c.search_config::regconfig, ${pool.text}))) AS l(lexeme)),
         queries AS MATERIALIZED (
           SELECT search_config, array_agg(part) AS parts,
                  string_agg(part::text, ' | ')::tsquery AS any_word,
                  string_agg(part::text, ' | ') FILTER (WHERE NOT common)::tsquery AS rare_word
             FROM lexemes GROUP BY search_config),
         found AS (
           SELECT m.id, m.search, q.search_config, q.parts FROM queries q
             JOIN personalities p ON p.search_config = q.search_config
                                 AND p.organization_id = ${pool.organizationId} AND ${personality}
             JOIN memories m ON m.personality_id = p.id AND m.end_user_id = ${pool.endUserId}
            WHERE m.search @@ q.rare_word ${older('m')}
           UNION ALL
           SELECT r.id, r.search, q.search_config, q.parts FROM (
             SELECT m.id, m.personality_id, m.search FROM memories m
              WHERE m.end_user_id = ${pool.endUserId}
                AND (${pool.personalityId}::uuid IS NULL OR m.personality_id = ${pool.personalityId}::uuid)
                ${older('m')}
              ORDER BY m.id DESC LIMIT ${RECENT_WINDOW}) r
             JOIN personalities p ON p.id = r.personality_id
             JOIN queries q ON q.search_config = p.search_config
            WHERE r.search @@ q.any_word),
         candidates AS MATERIALIZED (
           SELECT DISTINCT ON (id) id, search, length(search) AS lexemes, search_config, parts
             FROM found),
         average AS MATERIALIZED (
           SELECT count(*) AS n, greatest(avg(lexemes), 1) AS lexemes FROM candidates),
         weights AS MATERIALIZED (
           SELECT l.search_config, l.part,
                  ln((average.n + 1.0) / (d.df + 0.5)) AS idf
             FROM lexemes l CROSS JOIN average
            CROSS JOIN LATERAL (
              SELECT count(*) AS df FROM candidates c
               WHERE c.search_config = l.search_config AND c.search @@ l.part) d)
    SELECT c.id, held.lexemes::float8 / cardinality(c.parts) AS share,
           held.idf * ${BM25_LENGTH} AS relevance
      FROM candidates c CROSS JOIN average
     CROSS JOIN LATERAL (
           SELECT count(*) AS lexemes, sum(w.idf) AS idf FROM weights w
            WHERE w.search_config = c.search_config AND c.search @@ w.part) held
     ORDER BY share DESC, relevance DESC, c.id DESC
     LIMIT ${pool.limit}`;
}
