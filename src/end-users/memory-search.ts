import { raw, type Sql, sql } from '../database/sql';

/**
 * A subquery answering the search terms of `text` in the text search configuration `config`
 * (an SQL expression, e.g. a column): `any_word`, a tsquery matched by a memory holding any of
 * the text's lexemes (a question rarely repeats every word of the statement it asks about), and
 * `parts`, one tsquery per lexeme, to count how many of them a memory holds. Stop words and what
 * is not a word (emoji, punctuation) make no lexeme; with none left both are NULL, and NULL
 * matches nothing. The lexemes come from to_tsvector, already normalised, so each is quoted
 * (quotes and backslashes doubled) and cast rather than parsed again.
 */
export function searchTerms(config: Sql, text: string): Sql {
  return sql`(SELECT string_agg(q, ' | ')::tsquery AS any_word, array_agg(q::tsquery) AS parts
                FROM (SELECT '''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || '''' AS q
                        FROM unnest(tsvector_to_array(to_tsvector(${config}::regconfig, ${text}))) l
                     ) quoted)`;
}

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
 * Okapi BM25's length normalisation with its usual constants (k1 1.2: how fast a lexeme's weight
 * saturates; b 0.75: how much length counts), a lexeme counting once per memory.
 */
const BM25_LENGTH = raw('2.2 / (1 + 1.2 * (0.25 + 0.75 * c.lexemes / average.lexemes))');

/**
 * The `limit` memories of the pool most relevant to `text` (docs/memory.md): rows `(id, share,
 * relevance)`, best first. A memory holding any lexeme of the text qualifies; one holding more of
 * them ranks higher (`share`, 0..1); among memories holding as many, BM25 decides (a lexeme few of
 * the end user's memories hold weighs more than one half of them hold, and a short memory more
 * than a long one holding the same), then the newest. Every memory is matched in its
 * personality's language. The document frequencies come from the candidates themselves (every
 * memory holding a lexeme is one), so the only other read is the pool's size.
 */
export function rankedMemories(pool: MemoryPool): Sql {
  const personality = sql`(${pool.personalityId}::uuid IS NULL OR p.id = ${pool.personalityId}::uuid)`;
  const older = pool.before ? sql`AND m.id < ${pool.before}` : sql``;
  return sql`
    WITH terms AS MATERIALIZED (
           SELECT c.search_config, t.any_word, t.parts
             FROM (SELECT DISTINCT p.search_config FROM personalities p
                    WHERE p.organization_id = ${pool.organizationId} AND ${personality}) c
            CROSS JOIN LATERAL ${searchTerms(sql`c.search_config`, pool.text)} t),
         candidates AS MATERIALIZED (
           SELECT m.id, m.search, length(m.search) AS lexemes, terms.search_config, terms.parts
             FROM terms
             JOIN personalities p ON p.search_config = terms.search_config
                                 AND p.organization_id = ${pool.organizationId} AND ${personality}
             JOIN memories m ON m.personality_id = p.id AND m.end_user_id = ${pool.endUserId}
            WHERE m.search @@ terms.any_word ${older}),
         size AS (
           SELECT count(*) AS n FROM memories m JOIN personalities p ON p.id = m.personality_id
            WHERE m.end_user_id = ${pool.endUserId} AND ${personality} ${older}),
         average AS (SELECT greatest(avg(lexemes), 1) AS lexemes FROM candidates),
         weights AS (
           SELECT t.search_config, part,
                  ln(1 + (size.n - d.df + 0.5) / (d.df + 0.5)) AS idf
             FROM terms t CROSS JOIN unnest(t.parts) part CROSS JOIN size
            CROSS JOIN LATERAL (
              SELECT count(*) AS df FROM candidates c
               WHERE c.search_config = t.search_config AND c.search @@ part) d)
    SELECT c.id,
           (SELECT count(*) FROM unnest(c.parts) part WHERE c.search @@ part)::float8
             / cardinality(c.parts) AS share,
           (SELECT sum(w.idf) FROM weights w
             WHERE w.search_config = c.search_config AND c.search @@ w.part)
             * ${BM25_LENGTH} AS relevance
      FROM candidates c CROSS JOIN average
     ORDER BY share DESC, relevance DESC, c.id DESC
     LIMIT ${pool.limit}`;
}
