import { type Sql, sql } from '../database/sql';

/** Reciprocal rank fusion's constant (Cormack et al., 2009): a rank r counts 1 / (60 + r). */
export const RRF_K = 60;

/** The question's embedding and how far to compare it (docs/memory.md, "Recall by meaning"). */
export interface Meaning {
  model: string;
  vector: number[];
  /** The latest embeddings of the pool compared (an end user's, an organization's): the cost bound. */
  candidates: number;
  /** Below this cosine an item is not in the embedding ranking. */
  minSimilarity: number;
}

/**
 * The embedding ranking: rows `(id, rank)` of the best `depth` of `compared` (rows `(id,
 * embedding)`, the caller's bounded candidates of the question's model) by cosine with the
 * question's (unit vectors: a dot product over `real[]`), those below minSimilarity left out.
 */
export function nearest(compared: Sql, meaning: Meaning, depth: number): Sql {
  return sql`
    SELECT s.id, row_number() OVER (ORDER BY s.similarity DESC, s.id DESC) AS rank
      FROM (SELECT c.id,
                   (SELECT sum(a * b) FROM unnest(c.embedding, ${meaning.vector}::real[]) AS v(a, b)) AS similarity
              FROM (${compared}) c) s
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
