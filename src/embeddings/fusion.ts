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

/** Sketches kept by Hamming distance beyond the ranking's depth (sketchShortlist's first step). */
const SKETCHED_BEYOND_DEPTH = 100;

/** Whole vectors compared beyond the ranking's depth (what sketchShortlist keeps of those). */
const RESCORED_BEYOND_DEPTH = 40;

/** The levels of each component of the question in the asymmetric estimate: 4 bits. */
const QUESTION_LEVELS = 15;

/** What sketchShortlist compares the candidates' sketches with, built from the question's vector. */
export interface QuestionSketch {
  /** Its sign sketch, as embedding_sketch gives it: '1' where a component is positive. */
  signs: string;
  /**
   * Its components on QUESTION_LEVELS + 1 levels, from -max|q| (0) to +max|q| (15), as four bit
   * planes, the lowest first: plane j has '1' where bit j of the component's level is set.
   */
  planes: [string, string, string, string];
}

export function questionSketch(vector: readonly number[]): QuestionSketch {
  const largest = Math.max(...vector.map(Math.abs)) || 1;
  const levels = vector.map((x) => Math.round(((x / largest + 1) * QUESTION_LEVELS) / 2));
  const plane = (bit: number) => levels.map((level) => ((level >> bit) & 1 ? '1' : '0')).join('');
  return {
    signs: vector.map((x) => (x > 0 ? '1' : '0')).join(''),
    planes: [plane(0), plane(1), plane(2), plane(3)],
  };
}

/**
 * The ids of `sketches` (rows `(id, sketch)`, the caller's bounded candidates of the question's
 * model) whose whole vectors `nearest` compares: `depth` + RESCORED_BEYOND_DEPTH of them. Reading
 * a sketch (embedding_sketch, migration AddEmbeddingSketches) costs an index entry, a whole
 * vector a dot product, so it narrows in two steps on the sketches alone:
 *
 * 1. by the Hamming distance of the candidate's sketch to the question's (one XOR and one count
 *    a candidate: it estimates their angle, coarsely), the nearest `depth` +
 *    SKETCHED_BEYOND_DEPTH;
 * 2. of those, by the question's whole direction against the candidate's signs: the sum of the
 *    question's components, each taken positive where the candidate's is and negative where it
 *    is not (the asymmetric estimate of binary quantization, as in RaBitQ: only the stored side
 *    is reduced to a bit). With the question in four bit planes of its levels (questionSketch),
 *    that sum is a weighted count of the bits each plane shares with the sketch, at an ordering
 *    of 2 × Σ 2^j · bit_count(sketch & plane j) − 15 × bit_count(sketch).
 */
export function sketchShortlist(sketches: Sql, meaning: Meaning, depth: number): Sql {
  const question = questionSketch(meaning.vector);
  const [p0, p1, p2, p3] = question.planes.map((plane) => sql`s.sketch & ${plane}::varbit`);
  return sql`
    SELECT s.id FROM (
      SELECT s.id, s.sketch FROM (${sketches}) s
       WHERE length(s.sketch) = ${meaning.vector.length}
       ORDER BY bit_count(s.sketch # ${question.signs}::varbit), s.id DESC
       LIMIT ${depth + SKETCHED_BEYOND_DEPTH}) s
     ORDER BY 2 * (bit_count(${p0}) + 2 * bit_count(${p1}) + 4 * bit_count(${p2})
                   + 8 * bit_count(${p3})) - ${QUESTION_LEVELS} * bit_count(s.sketch) DESC, s.id DESC
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
