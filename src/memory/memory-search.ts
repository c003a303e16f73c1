import { raw, type Sql, sql } from '../database/sql';
import { fused, type Meaning, nearest, sketchShortlist, wholeVector } from '../embeddings/fusion';

export type { Meaning } from '../embeddings/fusion';

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
  /**
   * Memories holding as many of the words: the newest first (the search endpoint by words alone,
   * as contract §20 orders it); otherwise BM25 decides among them, then the newest (a reply's
   * recall, and the full-text ranking that fusion merges).
   */
  tiesNewestFirst?: boolean;
}

/** Retrieval reads at most this many distinct words of a text, the first ones (contract §29). */
export const RETRIEVAL_WORDS = 32;

/**
 * Of the end user's memories holding a word, the latest this many are candidates: a word held by
 * more of them (their dog's name, "love") is common for this user, and weighs little anyway.
 * memory_terms keeps about this many per word (the trigger of migration IndexMemoryTerms; when
 * one end user's replies are written many at once, more until PostingsTrimWorker's next pass:
 * docs/memory.md, "What recall costs").
 */
export const POSTINGS_PER_WORD = 64;

/**
 * The candidates one read takes at most, shared evenly by its distinct lexemes: POSTINGS_PER_WORD
 * each up to 16, fewer each beyond (32 for 32). Knowledge retrieval shares as many
 * (KNOWLEDGE_POSTINGS_PER_WORD each up to 8). A long message of words the end user holds often
 * would otherwise rank 2,048 memories (twice that over two languages), most of them holding one of
 * its words and nothing else of it. A search over every personality reads 32 lexemes per language
 * (at most 992 over the 31 text search configurations of personalities/languages.ts); each lexeme
 * reads at least one posting should more languages ever push the share below one.
 */
export const CANDIDATES_PER_READ = 1_024;

/**
 * Okapi BM25's length normalisation with its usual constants (k1 1.2: how fast a lexeme's weight
 * saturates; b 0.75: how much length counts), a lexeme counting once per memory. In float8
 * throughout: numeric arithmetic over two thousand candidates costs milliseconds.
 */
const BM25_LENGTH = raw('2.2 / (1 + 1.2 * (0.25 + 0.75 * w.length / average.length))');

/**
 * The `limit` memories of the pool most relevant to `text` (docs/memory.md): rows `(id, share,
 * relevance)`, best first. A memory holding any lexeme of the text qualifies; one holding more of
 * them ranks higher (`share`, 0..1). A lexeme the end user holds in POSTINGS_PER_WORD memories or
 * more ("tell", "love" for most people) is a stop word for the share when the text has other
 * lexemes: it tells no memory apart, and a memory holding two such words would otherwise outrank
 * the one holding the question's rare word. Among memories holding as many, the newest first with
 * `tiesNewestFirst`; otherwise BM25 decides (a lexeme few memories hold weighs more than one many
 * hold, a short memory more than a long one holding the same), then the newest. Every memory is
 * matched in its personality's language.
 *
 * The cost is bounded whatever the end user holds and whatever the table's statistics say: the
 * text gives at most RETRIEVAL_WORDS lexemes (its first distinct ones), and each lexeme at most
 * POSTINGS_PER_WORD memories (fewer past 16 lexemes: CANDIDATES_PER_READ), the latest of the end
 * user's that hold it: postings past them are never ranked (the count of common words may read
 * their index entries, without statistics, by a bitmap scan of the word). A candidate is
 * read from its posting alone, which carries the memory's personality and length (the language of
 * a personality, and whether it is in the pool, looked up in one JSON object of the pool's): no
 * memory is read until the winners are. Document frequencies are counted over the candidates:
 * exact for a word the end user holds fewer times than its share of the candidates, that share
 * for a commoner one.
 */
export function rankedMemories(pool: MemoryPool): Sql {
  const older = pool.before ? sql`AND t.memory_id < ${pool.before}` : sql``;
  return sql`
    WITH pool_personalities AS MATERIALIZED (
           SELECT coalesce(jsonb_object_agg(p.id, p.search_config), '{}') AS configs
             FROM personalities p
            WHERE p.organization_id = ${pool.organizationId}
              AND (${pool.personalityId}::uuid IS NULL OR p.id = ${pool.personalityId}::uuid)),
         lexemes AS MATERIALIZED (
           SELECT c.search_config, w.lexeme, count(*) OVER (PARTITION BY c.search_config) AS words
             FROM (SELECT DISTINCT e.search_config
                     FROM pool_personalities pp,
                          jsonb_each_text(pp.configs) AS e(personality_id, search_config)) c
            CROSS JOIN LATERAL (
                  SELECT v.lexeme FROM unnest(to_tsvector(c.search_config::regconfig, ${pool.text})) AS v
                   ORDER BY v.positions[1], v.lexeme LIMIT ${RETRIEVAL_WORDS}) w),
         common AS MATERIALIZED (
           SELECT w.lexeme FROM (SELECT DISTINCT lexeme FROM lexemes) w
            WHERE (SELECT count(*) FROM (
                    SELECT FROM memory_terms t
                     WHERE t.end_user_id = ${pool.endUserId} AND t.lexeme = w.lexeme
                     LIMIT ${POSTINGS_PER_WORD}) held) = ${POSTINGS_PER_WORD}),
         read_lexemes AS MATERIALIZED (
           SELECT l.lexeme, array_agg(l.search_config) AS configs, c.lexeme IS NOT NULL AS common,
                  count(*) OVER ()::int AS lexemes
             FROM lexemes l LEFT JOIN common c ON c.lexeme = l.lexeme
            GROUP BY l.lexeme, c.lexeme),
         languages AS MATERIALIZED (
           SELECT l.search_config, count(*) AS words, count(*) - count(c.lexeme) AS rare_words
             FROM lexemes l LEFT JOIN common c ON c.lexeme = l.lexeme
            GROUP BY l.search_config),
         hits AS MATERIALIZED (
           SELECT t.memory_id AS id, w.lexeme, t.memory_length::float8 AS length, g.words,
                  w.common, g.rare_words
             FROM read_lexemes w
            CROSS JOIN pool_personalities pp
            CROSS JOIN LATERAL (
                  SELECT t.memory_id, t.personality_id, t.memory_length FROM memory_terms t
                   WHERE t.end_user_id = ${pool.endUserId} AND t.lexeme = w.lexeme ${older}
                   ORDER BY t.memory_id DESC
                   LIMIT greatest(1, least(${POSTINGS_PER_WORD}::int,
                                           ${CANDIDATES_PER_READ}::int / w.lexemes))) t
             JOIN languages g ON g.search_config = pp.configs ->> t.personality_id::text
            WHERE g.search_config = ANY (w.configs))${pool.tiesNewestFirst ? byShareThenNewest(pool.limit) : byShareThenBm25(pool.limit)}`;
}

/**
 * A candidate's share of the text's words: of its rare ones when it has any (common words tell no
 * memory apart), else of all. Over the rows of one memory in `hits`, grouped by id.
 */
const SHARE = sql`CASE WHEN min(w.rare_words) > 0
                       THEN count(*) FILTER (WHERE NOT w.common)::float8 / min(w.rare_words)
                       ELSE count(*)::float8 / min(w.words) END`;

/** The search endpoint's order: nothing to weigh, so neither lengths nor frequencies are read. */
function byShareThenNewest(limit: number): Sql {
  return sql`
    SELECT w.id, ${SHARE} AS share, 0::float8 AS relevance
      FROM hits w
     GROUP BY w.id
     ORDER BY share DESC, w.id DESC
     LIMIT ${limit}`;
}

/** Recall's order: BM25 between memories holding as many of the words, then the newest. */
function byShareThenBm25(limit: number): Sql {
  return sql`,
         average AS MATERIALIZED (
           SELECT count(*)::float8 AS n, greatest(avg(length)::float8, 1) AS length
             FROM (SELECT DISTINCT ON (id) id, length FROM hits) d),
         weighted AS (
           SELECT id, length, words, common, rare_words,
                  count(*) OVER (PARTITION BY lexeme)::float8 AS df
             FROM hits)
    SELECT w.id, ${SHARE} AS share,
           sum(ln((average.n + 1) / (w.df + 0.5)) * ${BM25_LENGTH}) AS relevance
      FROM weighted w CROSS JOIN average
     GROUP BY w.id
     ORDER BY share DESC, relevance DESC, w.id DESC
     LIMIT ${limit}`;
}

/**
 * A ranking of the pool's memories as rows `(id, score)` with the ORDER BY that sorts them, best
 * first. Without `meaning` it is rankedMemories, unchanged (`score`: the share). With it, the
 * full-text ranking and the embedding ranking are merged by reciprocal rank fusion (`score`: the
 * sum of 1 / (RRF_K + rank) over the rankings that hold the memory): a memory not yet embedded is
 * found by its words alone, one that shares no word by its meaning. Each ranking gives twice
 * `limit` candidates, so that a memory second in both outranks one first in one alone.
 *
 * The embedding ranking reads the sketches of the end user's latest `candidates` embeddings (an
 * index-only range scan of memory_embeddings_sketches_idx, then the personality, the recall's
 * history bound and the model among those), keeps the nearest by sketch (sketchShortlist), and
 * computes only their cosines with the question's (unit vectors: a dot product over `real[]`):
 * its cost is bounded by `candidates` whatever the end user holds.
 */
export function memoryRanking(
  pool: MemoryPool,
  meaning: Meaning | null,
): { rows: Sql; order: Sql } {
  if (!meaning) {
    return {
      rows: sql`SELECT r.id, r.share AS score, r.relevance FROM (${rankedMemories(pool)}) r`,
      order: pool.tiesNewestFirst
        ? sql`r.score DESC, r.id DESC`
        : sql`r.score DESC, r.relevance DESC, r.id DESC`,
    };
  }
  const depth = pool.limit * 2;
  // Not `e`: the pool's SQL may name the outer end_users row so (recall does).
  const older = pool.before ? sql`AND x.memory_id < ${pool.before}` : sql``;
  const lexical = sql`
    SELECT l.id, row_number() OVER (ORDER BY l.share DESC, l.relevance DESC, l.id DESC) AS rank
      FROM (${rankedMemories({ ...pool, limit: depth, tiesNewestFirst: false })}) l`;
  const sketches = sql`
    SELECT c.memory_id AS id, c.sketch
      FROM (SELECT x.memory_id, x.personality_id, x.model, x.sketch FROM memory_embeddings x
             WHERE x.end_user_id = ${pool.endUserId} ${older}
             ORDER BY x.memory_id DESC LIMIT ${meaning.candidates}) c
     WHERE c.model = ${meaning.model}
       AND (${pool.personalityId}::uuid IS NULL OR c.personality_id = ${pool.personalityId}::uuid)`;
  const compared = sql`
    SELECT x.memory_id AS id, ${wholeVector(meaning)} AS whole
      FROM (${sketchShortlist(sketches, meaning, depth)}) s
      JOIN memory_embeddings x ON x.memory_id = s.id AND x.end_user_id = ${pool.endUserId}`;
  return {
    rows: sql`SELECT f.id, f.score, 0::float8 AS relevance
                FROM (${fused(lexical, nearest(compared, meaning, depth), pool.limit)}) f`,
    order: sql`r.score DESC, r.id DESC`,
  };
}

/**
 * The memory `m` of each ranked memory `r` (a FROM item that follows the ranking), where `checks`
 * on `m` hold: the ranking read only postings, so the memory is checked here to be the one asked
 * for. One lookup by primary key per ranked memory whatever the table's statistics say: the
 * lookup is a subquery of its own, kept whole by OFFSET 0 so that the checks are not pushed into
 * it. Joined plainly, or with the checks beside the id, a table without statistics had the
 * planner read an end user's whole conversation, or a personality's every memory, for each
 * ranked memory (every path estimated at one row), and one end user's replies slowed as their
 * history grew (bench long-history).
 */
export function memoryOfRanked(checks: Sql): Sql {
  return sql`CROSS JOIN LATERAL (
               SELECT m.* FROM (SELECT * FROM memories WHERE id = r.id OFFSET 0) m
                WHERE ${checks}) m`;
}
