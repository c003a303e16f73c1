import type { DataSource, MigrationInterface } from 'typeorm';

/**
 * Reverts `migration` (its down()), runs `meanwhile` (what the previous release writes), then runs
 * it again twice, as a start after one that stopped before recording it would: the second run
 * must find nothing left to do. The migration is run again even when `meanwhile` fails. Then
 * `later`, the newer migrations that redefine what it defines (a function it replaces), run again
 * too, so the specs after this one find the latest schema, not this migration's.
 */
export async function revertAndRerun(
  dataSource: DataSource,
  migration: MigrationInterface,
  meanwhile: () => Promise<unknown>,
  later: MigrationInterface[] = [],
): Promise<void> {
  const runner = dataSource.createQueryRunner();
  try {
    await migration.down(runner);
    await meanwhile();
  } finally {
    try {
      await migration.up(runner);
      await migration.up(runner);
      for (const newer of later) await newer.up(runner);
    } finally {
      await runner.release();
    }
  }
}
