import { Client } from 'pg';
import type { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import { eventually } from './wait';

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
  const held = await HeldTransaction.begin();
  try {
    await held.run(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  } catch (error) {
    await held.end();
    throw error;
  }
  return { release: () => held.end() };
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

/**
 * A transaction held open on a connection of its own (the spec's database), for what a statement
 * of the service does when it meets another's uncommitted change: `run` the change, start the
 * statement, `untilWaitedOn` (polled from another session: a transaction caches what
 * pg_stat_activity shows it), then `commit`.
 */
export class HeldTransaction {
  private closed = false;

  private constructor(
    private readonly client: Client,
    private readonly pid: number,
    private readonly databaseUrl: string | undefined,
  ) {}

  /** On `databaseUrl`: the run's database, or a suite's own (Service.databaseUrl). */
  static async begin(databaseUrl = process.env.DATABASE_URL): Promise<HeldTransaction> {
    const client = new Client({ connectionString: databaseUrl });
    await client.connect();
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await client.query('BEGIN');
    return new HeldTransaction(client, rows[0].pid, databaseUrl);
  }

  async run(text: string, values: unknown[] = []): Promise<number> {
    return (await this.client.query(text, values)).rowCount ?? 0;
  }

  /** Resolves once a session waits on this transaction's locks. */
  async untilWaitedOn(): Promise<void> {
    const observer = new Client({ connectionString: this.databaseUrl });
    await observer.connect();
    try {
      await eventually(async () => {
        const { rows } = await observer.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))',
          [this.pid],
        );
        return rows[0].n > 0 ? true : undefined;
      }, 'a statement waiting on the held transaction');
    } finally {
      await observer.end();
    }
  }

  async commit(): Promise<void> {
    this.closed = true;
    try {
      await this.client.query('COMMIT');
    } finally {
      await this.client.end();
    }
  }

  /** Ends it without its change, unless committed already (a `finally` after `commit`). */
  async end(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.client.query('ROLLBACK');
    } finally {
      await this.client.end();
    }
  }
}

/**
 * What `request` answers when it runs while the member's demotion to `member` holds their
 * membership's row lock (as members.service's demotion does), answered once the demotion has
 * committed: how the specs show that a write checks the role in its own statement, and waits.
 */
export async function answeredDuringDemotion<T>(
  member: { organizationId: string; userId: string },
  request: () => PromiseLike<T>,
): Promise<T> {
  const demotion = await HeldTransaction.begin();
  try {
    await demotion.run(
      `UPDATE memberships SET role = 'member' WHERE organization_id = $1 AND user_id = $2`,
      [member.organizationId, member.userId],
    );
    const answered = Promise.resolve(request());
    await demotion.untilWaitedOn();
    await demotion.commit();
    return await answered;
  } finally {
    await demotion.end();
  }
}
