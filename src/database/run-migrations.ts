import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource, Migration, QueryRunner } from 'typeorm';

// Any constant works; it only has to be the same for every instance of this service.
const MIGRATION_LOCK_KEY = 727_301_001;

/** How long an instance waits between two tries for the lock another instance holds. */
const LOCK_POLL_MS = 250;

async function tryLock(runner: QueryRunner): Promise<boolean> {
  const [{ locked }] = (await runner.query('SELECT pg_try_advisory_lock($1) AS locked', [
    MIGRATION_LOCK_KEY,
  ])) as Array<{ locked: boolean }>;
  return locked;
}

/** Who holds the migration lock, as an operator would look for them: pid, client address. */
async function lockHolder(runner: QueryRunner): Promise<string> {
  const rows = (await runner.query(
    `SELECT l.pid, host(a.client_addr) AS address, a.application_name AS application
       FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = $1
        AND l.objsubid = 1
        -- Advisory locks are per database: the same key held in another is no one's here.
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    [MIGRATION_LOCK_KEY],
  )) as Array<{ pid: number; address: string | null; application: string | null }>;
  if (rows.length === 0) return 'another session (gone since)';
  const [{ pid, address, application }] = rows;
  return `PostgreSQL backend ${pid}${address ? ` from ${address}` : ''}${application ? ` (${application})` : ''}`;
}

/**
 * Applies pending migrations while holding a PostgreSQL advisory lock, so several instances
 * starting at once apply each migration exactly once instead of racing on the same DDL.
 *
 * The lock is tried again and again, never waited for: a session blocked in pg_advisory_lock
 * holds a snapshot, and a concurrent index build of the migration holding the lock (built on
 * another connection) waits for every older snapshot, so an instance starting meanwhile would
 * hang both, in a cycle PostgreSQL's deadlock detector cannot see.
 */
export async function runMigrationsExclusively(
  dataSource: DataSource,
  /** Told once, when the lock is held elsewhere: a wait that would otherwise log nothing. */
  onWaiting: (holder: string) => void = () => undefined,
): Promise<Migration[]> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    if (!(await tryLock(runner))) {
      onWaiting(await lockHolder(runner));
      while (!(await tryLock(runner))) await sleep(LOCK_POLL_MS);
    }
    try {
      return await dataSource.runMigrations({ transaction: 'each' });
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await runner.release();
  }
}

/**
 * The names of this release's migrations the database has not recorded, read without writing
 * anything (TypeORM's showMigrations creates its table on an empty database). Recorded
 * migrations this release does not know are a newer release's: they only add, and are no reason.
 * Oldest first.
 */
export async function pendingMigrations(dataSource: DataSource): Promise<string[]> {
  const table = dataSource.options.migrationsTableName ?? 'migrations';
  const [{ exists }] = await dataSource.query<Array<{ exists: boolean }>>(
    'SELECT to_regclass($1) IS NOT NULL AS exists',
    [table],
  );
  const applied = new Set<string>();
  if (exists) {
    const rows = await dataSource.query<Array<{ name: string }>>(`SELECT name FROM "${table}"`);
    for (const { name } of rows) applied.add(name);
  }
  return dataSource.migrations
    .map((migration) => migration.name ?? migration.constructor.name)
    .filter((name) => !applied.has(name))
    .sort((a, b) => timestampOf(a) - timestampOf(b));
}

/**
 * A migration's timestamp, the digits its name ends with: the order TypeORM runs them in, which
 * the list it loads them in is not (found by review: start-up named the first as the last).
 */
function timestampOf(name: string): number {
  return Number(/(\d+)$/.exec(name)?.[1] ?? 0);
}
