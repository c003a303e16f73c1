import type { Client } from 'pg';

/**
 * Runs `work` in a transaction of `db` whose costs make reading a whole table look cheap, generic
 * plans forced, as a plan cached while the table was small would; rolled back after. `wholeReads`
 * answers how many sequential scans of `table` the transaction has made so far.
 */
export async function favouringWholeReads<T>(
  db: Client,
  table: string,
  work: (wholeReads: () => Promise<number>) => Promise<T>,
): Promise<T> {
  const wholeReads = async () =>
    (
      await db.query<{ n: number }>(
        'SELECT seq_scan::int AS n FROM pg_stat_xact_user_tables WHERE relname = $1',
        [table],
      )
    ).rows[0].n;
  await db.query('BEGIN');
  try {
    await db.query('SET LOCAL random_page_cost = 1000');
    await db.query('SET LOCAL plan_cache_mode = force_generic_plan');
    return await work(wholeReads);
  } finally {
    await db.query('ROLLBACK');
  }
}
