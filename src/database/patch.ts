import { join, raw, type Sql, sql } from './sql';

/**
 * The SET list of an `INSERT INTO table AS <alias> … ON CONFLICT DO UPDATE` that applies a PATCH:
 * each column the PATCH gives takes the inserted (`excluded`) value, any other keeps the row's,
 * as it is once the statement has locked it. Read-merge-write in JavaScript would let concurrent
 * PATCHes of different columns undo one another. Whether a column is given is a parameter, so
 * the text is the same for every PATCH (a named statement could carry it). Columns are the code's, never
 * input.
 */
export function patchedColumns(alias: string, patch: Readonly<Record<string, unknown>>): Sql {
  return join(
    Object.entries(patch).map(
      ([column, value]) =>
        sql`${raw(column)} = CASE WHEN ${value !== undefined}::boolean
                               THEN excluded.${raw(column)} ELSE ${raw(alias)}.${raw(column)} END`,
    ),
  );
}
