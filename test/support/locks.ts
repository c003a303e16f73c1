import { Client } from 'pg';
import type { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';

export interface HeldLock {
  /** Rolls the holding transaction back (releasing the lock) and disconnects. */
  release(): Promise<void>;
}

/**
 * Locks `table` ACCESS EXCLUSIVE from a session of its own, so any statement reading it waits:
 * how the specs make a read run past its time budget. Release it as soon as the budget is spent,
 * since other suites share the database.
 */
export async function lockTable(table: string): Promise<HeldLock> {
  const holder = new Client({ connectionString: process.env.DATABASE_URL });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  } catch (error) {
    await holder.end();
    throw error;
  }
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      try {
        await holder.query('ROLLBACK');
      } finally {
        await holder.end();
      }
    },
  };
}

/**
 * Runs `work` while `operation` on `table` fails with `message` (a trigger of the test's, dropped
 * afterwards), through `query` on the database the service uses: how specs make one statement
 * of a larger write fail. Only on a database no other suite writes to at the time, or on a
 * table whose rows the spec alone touches then.
 */
export async function refusingWrites<T>(
  query: (text: string) => Promise<unknown>,
  refusal: { table: string; operation: 'INSERT' | 'UPDATE' | 'DELETE'; message: string },
  work: () => Promise<T>,
): Promise<T> {
  const name = `refuse_${refusal.table}_${refusal.operation.toLowerCase()}`;
  const message = refusal.message.replace(/'/g, "''");
  await query(`
    CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION '${message}'; END $$;
    CREATE TRIGGER ${name} BEFORE ${refusal.operation} ON ${refusal.table}
      FOR EACH ROW EXECUTE FUNCTION ${name}();`);
  try {
    return await work();
  } finally {
    await query(`DROP TRIGGER ${name} ON ${refusal.table}; DROP FUNCTION ${name}();`);
  }
}

/**
 * Resolves once `count` sessions of the database wait for a lock (a row's, an advisory one),
 * polling for 10 s at most: how a spec knows that concurrent calls have reached the point where
 * one of them holds the others up.
 */
export async function sessionsWaitingForLocks(database: Database, count: number): Promise<void> {
  for (let tries = 0; tries < 200; tries += 1) {
    const [row] = await database.rows<{ waiting: number }>(
      sql`SELECT count(*)::int AS waiting FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (row.waiting >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`fewer than ${count} sessions waited for a lock`);
}
