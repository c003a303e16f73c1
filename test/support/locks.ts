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
