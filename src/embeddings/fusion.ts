import { raw, type Sql, sql } from '../database/sql';

/** Reciprocal rank fusion's constant (Cormack et al., 2009): a rank r counts 1 / (60 + r). */
export const RRF_K = 60;

/** The question's embedding and how far to compare it (docs/memory.md, "Recall by meaning"). */
export interface Meaning {
  model: string;
  vector: number[];
  /**
   * The latest embeddings of the pool (an end user's, an organization's) whose sketches are
   * compared: the cost bound.
   */
  candidates: number;
  /** Below this cosine an item is not in the embedding ranking. */
  minSimilarity: number;
  /**
   * How whole vectors are compared: `pgvector`, the `vector` column and the extension's inner
   * product, where migration AddPgvectorColumns could add it; `array`, the `real[]` column and
   * `unnest`, everywhere else (Embedder.onModuleInit looks once).
   */
  wholeVectors: 'pgvector' | 'array';
}

/** Whole vectors compared beyond the ranking's depth: the sketches' shortlist is this much longer. */
const RESCORED_BEYOND_DEPTH = 100;

/**
 * The ids of `sketches` (rows `(id, sketch)`, the caller's bounded candidates of the question's
 * model) nearest to the question by the Hamming distance of their sign sketches
 * (embedding_sketch, migration AddEmbeddingSketches), `depth` + RESCORED_BEYOND_DEPTH of them:
 * the ones whose whole vectors `nearest` compares. The distance of two sketches estimates the
 * angle of their vectors; reading a sketch costs an index entry, a whole vector a dot product.
 */
export function sketchShortlist(sketches: Sql, meaning: Meaning, depth: number): Sql {
  return sql`
    SELECT s.id FROM (${sketches}) s
     WHERE length(s.sketch) = ${meaning.vector.length}
     ORDER BY bit_count(s.sketch # (SELECT embedding_sketch(${meaning.vector}::real[]))), s.id DESC
     LIMIT ${depth + RESCORED_BEYOND_DEPTH}`;
}

/**
 * The whole vector of the embeddings row `x` that `nearest` compares (Meaning.wholeVectors); a
 * row the migration's backfill has not reached yet has only its `embedding`, cast.
 */
export function wholeVector(meaning: Meaning): Sql {
  return meaning.wholeVectors === 'pgvector'
    ? raw('coalesce(x.vector, x.embedding::vector)')
    : raw('x.embedding');
}

/**
 * The embedding ranking: rows `(id, rank)` of the best `depth` of `compared` (rows `(id,
 * whole)`, the caller's shortlist, `whole` its wholeVector) by cosine with the question's (unit
 * vectors: a dot product), those below minSimilarity left out.
 */
export function nearest(compared: Sql, meaning: Meaning, depth: number): Sql {
  const pgvector = meaning.wholeVectors === 'pgvector';
  // `<#>` is the negative inner product. Without it, the two arrays are unnested side by side in
  // the select list (ProjectSet), not by unnest(a, b) in FROM, whose function scan copies both
  // into a tuplestore first: 14 µs a vector of 256 dimensions against 30 (jit off, this machine).
  const similarity = pgvector
    ? sql`(c.whole <#> q.vector) * -1`
    : sql`(SELECT sum(v.a * v.b) FROM (SELECT unnest(c.whole) AS a, unnest(q.vector) AS b) v)`;
  const question = pgvector
    ? sql`${meaning.vector}::real[]::vector`
    : sql`${meaning.vector}::real[]`;
  // OFFSET 0 keeps each subquery whole: the question's vector is read from its text once, not
  // per candidate, and each cosine is computed once, not again for the filter and the order.
  return sql`
    SELECT s.id, row_number() OVER (ORDER BY s.similarity DESC, s.id DESC) AS rank
      FROM (SELECT c.id, ${similarity} AS similarity
              FROM (${compared}) c
             CROSS JOIN (SELECT ${question} AS vector OFFSET 0) q
            OFFSET 0) s
     WHERE s.similarity >= ${meaning.minSimilarity}
     ORDER BY s.similarity DESC, s.id DESC LIMIT ${depth}`;
}

/**
 * Reciprocal rank fusion of two rankings given as rows `(id, rank)`: rows `(id, score)`, the
 * `limit` best, `score` the sum of 1 / (RRF_K + rank) over the rankings that hold the item (an
 * item in one ranking only, not yet embedded or sharing no word, is still found). Ties: the
 * newer id first.
 */
export function fused(lexical: Sql, embedding: Sql, limit: number): Sql {
  return sql`
    WITH lexical AS MATERIALIZED (${lexical}),
         nearest AS MATERIALIZED (${embedding})
    SELECT f.id, sum(1.0 / (${RRF_K} + f.rank))::float8 AS score
      FROM (SELECT id, rank FROM lexical UNION ALL SELECT id, rank FROM nearest) f
     GROUP BY f.id
     ORDER BY score DESC, f.id DESC
     LIMIT ${limit}`;
}
