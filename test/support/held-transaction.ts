import { Client } from 'pg';
import { eventually } from './wait';

/**
 * A transaction held open on a connection of its own (the spec's database), for what a statement
 * of the service does when it meets another's uncommitted change: `run` the change, start the
 * statement, `untilWaitedOn` (polled from another session: a transaction caches what
 * pg_stat_activity shows it), then `commit`.
 */
export class HeldTransaction {
  private constructor(
    private readonly client: Client,
    private readonly pid: number,
  ) {}

  static async begin(): Promise<HeldTransaction> {
    const client = new Client({ connectionString: process.env.DATABASE_URL });
    await client.connect();
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await client.query('BEGIN');
    return new HeldTransaction(client, rows[0].pid);
  }

  async run(text: string, values: unknown[] = []): Promise<number> {
    return (await this.client.query(text, values)).rowCount ?? 0;
  }

  /** Resolves once a session waits on this transaction's locks. */
  async untilWaitedOn(): Promise<void> {
    const observer = new Client({ connectionString: process.env.DATABASE_URL });
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
    try {
      await this.client.query('COMMIT');
    } finally {
      await this.client.end();
    }
  }

  /** Ends it without its change (a spec that failed before committing). */
  async end(): Promise<void> {
    await this.client.query('ROLLBACK').catch(() => undefined);
    await this.client.end().catch(() => undefined);
  }
}
