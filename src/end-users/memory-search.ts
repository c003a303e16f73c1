import { type Sql, sql } from '../database/sql';

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

/** How many of the terms' lexemes the memory `m` holds, over how many there are (0..1). */
export const MATCHED_SHARE = sql`(SELECT count(*) FROM unnest(terms.parts) p WHERE m.search @@ p)::float8
                                  / cardinality(terms.parts)`;
