import { join, raw, type Sql, sql } from './sql';

/**
 * A list paged by the row of the last item seen (Stripe-style `starting_after`): rows come in
 * (`sortBy`, `id`) order, and the next page starts after the cursor's row. The cursor's row is
 * read in SQL, not in JavaScript: `created_at` has microseconds, which a JS Date rounds away.
 */
export interface Keyset {
  /** The table the list's rows and the cursor's row come from (text of the code, never input). */
  table: string;
  /** The table's alias in the list's statement, when it has one (`m` → `m.created_at`). */
  alias?: string;
  /**
   * The sort column, `created_at` unless said; or an expression of the row's columns, given the
   * prefix each column takes (`(p) => `${p}prompt_tokens + ${p}completion_tokens``).
   */
  sortBy?: string | ((prefix: string) => string);
  /** The column the cursor names, the tie-breaker of the order; `id` unless said. */
  id?: string;
  /** The id of the last item seen; undefined for the first page. */
  cursor: string | undefined;
  /** The cursor's type: `uuid` unless said (a model's name is `text`). */
  cursorType?: 'uuid' | 'text';
  /**
   * The `id` the cursor stands for, when the cursor is not the id itself (an end user's own
   * user_id for a list keyed by end_user_id): SQL that reads it; the cursor itself unless said.
   */
  cursorId?: Sql;
  /**
   * Columns the cursor's row must match, the list's own scope (its organization, its user): a
   * cursor naming another list's row positions nothing, the same as one naming no row.
   */
  scope: Readonly<Record<string, unknown>>;
  order: 'asc' | 'desc';
}

function sortKeyOf(keyset: Keyset, prefix: string): string {
  const sortBy = keyset.sortBy ?? 'created_at';
  return typeof sortBy === 'string' ? `${prefix}${sortBy}` : sortBy(prefix);
}

function columnsOf(keyset: Keyset, alias: string | undefined): Sql {
  const prefix = alias ? `${alias}.` : '';
  return raw(`${sortKeyOf(keyset, prefix)}, ${prefix}${keyset.id ?? 'id'}`);
}

/**
 * `(cursor IS NULL OR (sort, id) > (the cursor's row))`, `<` for a descending list. The text is
 * the same with and without a cursor, so a named (prepared) statement can carry it.
 */
export function keysetAfter(keyset: Keyset): Sql {
  const cursor = keyset.cursor ?? null;
  const scope = Object.entries(keyset.scope).map(
    ([column, value]) => sql`c.${raw(column)} = ${value}`,
  );
  const comparison = raw(keyset.order === 'asc' ? '>' : '<');
  const type = raw(keyset.cursorType ?? 'uuid');
  const id = keyset.cursorId ?? sql`${cursor}::${type}`;
  return sql`(${cursor}::${type} IS NULL OR (${columnsOf(keyset, keyset.alias)}) ${comparison} (
      SELECT ${columnsOf(keyset, 'c')} FROM ${raw(keyset.table)} c
       WHERE c.${raw(keyset.id ?? 'id')} = ${id} AND ${join(scope, ' AND ')}))`;
}

/** `sort, id` in the list's order: what ORDER BY says for the rows keysetAfter pages. */
export function keysetOrder(keyset: Keyset): Sql {
  const prefix = keyset.alias ? `${keyset.alias}.` : '';
  const direction = keyset.order === 'asc' ? '' : ' DESC';
  return raw(`${sortKeyOf(keyset, prefix)}${direction}, ${prefix}${keyset.id ?? 'id'}${direction}`);
}
