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
  const [{ valid }] = (await queryRunner.query(
    `SELECT bool_and(i.indisvalid) AS valid FROM pg_index i WHERE i.indexrelid = to_regclass($1)`,
    [`public.${name}`],
  )) as Array<{ valid: boolean | null }>;
  if (valid) return;
  if (valid === false) await queryRunner.query(`DROP INDEX CONCURRENTLY "public"."${name}"`);
  // A concurrent build waits for every older transaction and blocks no one: no lock timeout.
  await queryRunner.query(`SET lock_timeout = 0`);
  await queryRunner.query(`CREATE INDEX CONCURRENTLY "${name}" ${definition}`);
  await queryRunner.query(`RESET lock_timeout`);
}
