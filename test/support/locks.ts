import { Client } from 'pg';

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
