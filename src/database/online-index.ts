import type { QueryRunner } from 'typeorm';

/**
 * Builds an index online, for a migration that runs outside a transaction (`transaction =
 * false`): concurrently, so that writes to the table go on meanwhile; an invalid index left by
 * a build that stopped is dropped and built again, a valid one is kept. `definition` is what
 * follows `CREATE INDEX CONCURRENTLY "name"`, from `ON` on.
 */
export async function createIndexOnline(
  queryRunner: QueryRunner,
  name: string,
  definition: string,
): Promise<void> {
  // A concurrent drop or build waits for every older transaction (a long erasure, a dump) and
  // blocks no one meanwhile: no lock timeout, for the drop of a stopped build's index too.
  await queryRunner.query(`SET lock_timeout = 0`);
  try {
    const [{ valid }] = (await queryRunner.query(
      `SELECT bool_and(i.indisvalid) AS valid FROM pg_index i WHERE i.indexrelid = to_regclass($1)`,
      [`public.${name}`],
    )) as Array<{ valid: boolean | null }>;
    if (valid) return;
    if (valid === false) await queryRunner.query(`DROP INDEX CONCURRENTLY "public"."${name}"`);
    await queryRunner.query(`CREATE INDEX CONCURRENTLY "${name}" ${definition}`);
  } finally {
    await queryRunner.query(`RESET lock_timeout`);
  }
}

/**
 * Runs `steps` under a lock timeout of 10 s, for a migration that runs outside a transaction:
 * each ALTER TABLE takes its table's lock for an instant, and behind a long transaction on the
 * table it gives up after 10 s (the migration is run again) instead of queueing every later
 * reader of the table behind it.
 */
export async function withShortLocks(
  queryRunner: QueryRunner,
  steps: () => Promise<void>,
): Promise<void> {
  await queryRunner.query(`SET lock_timeout = '10s'`);
  try {
    await steps();
  } finally {
    await queryRunner.query(`RESET lock_timeout`);
  }
}

/** Where the catalog records a table's columns and constraints, by name. */
const CATALOG = {
  column: `SELECT count(*) = 1 AS found FROM pg_attribute
            WHERE attrelid = to_regclass($1) AND NOT attisdropped AND attname = $2`,
  constraint: `SELECT count(*) = 1 AS found FROM pg_constraint
                WHERE conrelid = to_regclass($1) AND conname = $2`,
};

/**
 * Whether `table` has the column or the constraint `name` already: a migration outside a
 * transaction checks before each step, so that it can run again should it stop half way
 * (ADD COLUMN IF NOT EXISTS locks the table even when there is nothing to add).
 */
export async function has(
  queryRunner: QueryRunner,
  kind: keyof typeof CATALOG,
  table: string,
  name: string,
): Promise<boolean> {
  const [{ found }] = (await queryRunner.query(CATALOG[kind], [`public.${table}`, name])) as Array<{
    found: boolean;
  }>;
  return found;
}
