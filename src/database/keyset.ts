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
  /** The sort column; `created_at` unless said. */
  sortBy?: string;
  /** The column the cursor names (a uuid), the tie-breaker of the order; `id` unless said. */
  id?: string;
  /** The id of the last item seen; undefined for the first page. */
  cursor: string | undefined;
  /**
   * Columns the cursor's row must match, the list's own scope (its organization, its user): a
   * cursor naming another list's row positions nothing, the same as one naming no row.
   */
  scope: Readonly<Record<string, unknown>>;
  order: 'asc' | 'desc';
}

function columnsOf(keyset: Keyset, alias: string | undefined): Sql {
  const prefix = alias ? `${alias}.` : '';
  return raw(`${prefix}${keyset.sortBy ?? 'created_at'}, ${prefix}${keyset.id ?? 'id'}`);
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
  return sql`(${cursor}::uuid IS NULL OR (${columnsOf(keyset, keyset.alias)}) ${comparison} (
      SELECT ${columnsOf(keyset, 'c')} FROM ${raw(keyset.table)} c
       WHERE c.${raw(keyset.id ?? 'id')} = ${cursor}::uuid AND ${join(scope, ' AND ')}))`;
}

/** `sort, id` in the list's order: what ORDER BY says for the rows keysetAfter pages. */
export function keysetOrder(keyset: Keyset): Sql {
  const prefix = keyset.alias ? `${keyset.alias}.` : '';
  const direction = keyset.order === 'asc' ? '' : ' DESC';
  return raw(
    `${prefix}${keyset.sortBy ?? 'created_at'}${direction}, ${prefix}${keyset.id ?? 'id'}${direction}`,
  );
}
