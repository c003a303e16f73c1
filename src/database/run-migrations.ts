import type { DataSource, Migration } from 'typeorm';

// Any constant works; it only has to be the same for every instance of this service.
const MIGRATION_LOCK_KEY = 727_301_001;

/**
 * Applies pending migrations while holding a PostgreSQL advisory lock, so several instances
 * starting at once apply each migration exactly once instead of racing on the same DDL.
 */
export async function runMigrationsExclusively(dataSource: DataSource): Promise<Migration[]> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      return await dataSource.runMigrations({ transaction: 'each' });
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await runner.release();
  }
}
