import type { DataSource, MigrationInterface, QueryRunner } from 'typeorm';

/** Every function of the schema with its definition (a trigger's body and settings included). */
async function functions(runner: QueryRunner): Promise<Map<string, string>> {
  const rows = (await runner.query(
    `SELECT p.oid::regprocedure::text AS name, pg_get_functiondef(p.oid) AS definition
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = 'public' AND p.prokind = 'f'`,
  )) as Array<{ name: string; definition: string }>;
  return new Map(rows.map((row) => [row.name, row.definition]));
}

/**
 * Reverts `migration` (its down()), runs `meanwhile` (what the previous release writes), then runs
 * it again twice, as a start after one that stopped before recording it would: the second run
 * must find nothing left to do. The migration is run again even when `meanwhile` fails. Then
 * `later`, the newer migrations that redefine what it defines (a function it replaces), run again
 * too, so the specs after this one find the latest schema, not this migration's. A function left
 * otherwise than before the revert (a `later` forgotten) fails the call: a trigger of an older
 * release, left in the shared database, would change what every spec after this one measures.
 */
export async function revertAndRerun(
  dataSource: DataSource,
  migration: MigrationInterface,
  meanwhile: () => Promise<unknown>,
  later: MigrationInterface[] = [],
): Promise<void> {
  const runner = dataSource.createQueryRunner();
  try {
    const before = await functions(runner);
    try {
      await migration.down(runner);
      await meanwhile();
    } finally {
      await migration.up(runner);
      await migration.up(runner);
      for (const newer of later) await newer.up(runner);
    }
    const after = await functions(runner);
    const changed = [...before].filter(([name, definition]) => after.get(name) !== definition);
    if (changed.length > 0) {
      throw new Error(
        `revertAndRerun left ${changed.map(([name]) => name).join(', ')} as ${migration.constructor.name} ` +
          'defines it, not as the latest migrations do: pass those migrations as `later`',
      );
    }
  } finally {
    await runner.release();
  }
}
