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
