import type { TestingModule } from '@nestjs/testing';
import { isStatementTimeout } from '../../src/common/errors/statement-timeout';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import { MetricsService } from '../../src/metrics/metrics.service';
import { moduleAlone } from '../support/module-alone';

const BUDGET_MS = 100;

/**
 * Database#rowsWithin on a real PostgreSQL (docs/database.md, "Bounded time"): a read under a
 * time budget runs on a session of its own pool that carries the budget, in one round trip.
 */
describe('Database: reads under a time budget (real database)', () => {
  let moduleRef: TestingModule | undefined;

  afterEach(async () => {
    await moduleRef?.close();
    moduleRef = undefined;
  });

  async function databaseOn(url: string): Promise<Database> {
    moduleRef = await moduleAlone([], { DATABASE_URL: url, REDIS_URL: undefined });
    return moduleRef.get(Database);
  }

  const backendOf = async (database: Database) =>
    (await database.rowsWithin<{ pid: number }>(sql`SELECT pg_backend_pid() AS pid`, BUDGET_MS))[0]
      .pid;
  const budgetOf = async (database: Database) =>
    (
      await database.rowsWithin<{ statement_timeout: string }>(
        sql`SELECT current_setting('statement_timeout') AS statement_timeout`,
        BUDGET_MS,
      )
    )[0].statement_timeout;
  const sleepPastBudget = (database: Database) =>
    database.rowsWithin(sql`SELECT pg_sleep(2)`, BUDGET_MS);

  it('cancels a read past its budget (57014) and keeps the session for the next read', async () => {
    const database = await databaseOn(process.env.DATABASE_URL!);
    const backend = await backendOf(database);
    expect(await budgetOf(database)).toBe(`${BUDGET_MS}ms`);

    // pg_sleep(2) answers without error unless PostgreSQL cancels it: the SQLSTATE is the proof.
    const cancelled = await sleepPastBudget(database).catch((error: unknown) => error);
    expect(isStatementTimeout(cancelled)).toBe(true);
    // A refused statement leaves a sound session: not closed, so the next read opens none.
    expect(await backendOf(database)).toBe(backend);
    // The requests' pool keeps its own, wider budget.
    const [requests] = await database.rows<{ statement_timeout: string }>(
      sql`SELECT current_setting('statement_timeout') AS statement_timeout`,
    );
    expect(requests.statement_timeout).not.toBe(`${BUDGET_MS}ms`);

    // Each pool's connections are shown apart: a queue for the budgeted reads is visible.
    const gauge = await moduleRef!
      .get(MetricsService)
      .registry.getSingleMetric('db_pool_connections')!
      .get();
    const of = (pool: string, state: string) =>
      gauge.values.find((value) => value.labels.pool === pool && value.labels.state === state)
        ?.value;
    expect(of('bounded_reads', 'total')).toBe(1);
    expect(of('bounded_reads', 'idle')).toBe(1);
    expect(of('requests', 'total')).toBeGreaterThanOrEqual(1);
  });

  it('holds the budget whatever DATABASE_URL sets for its sessions at start-up', async () => {
    const url = new URL(process.env.DATABASE_URL!);
    url.searchParams.set('options', '-c statement_timeout=60000 -c search_path=public');
    url.searchParams.set('statement_timeout', '60000');
    const database = await databaseOn(url.toString());

    expect(await budgetOf(database)).toBe(`${BUDGET_MS}ms`);
    const cancelled = await sleepPastBudget(database).catch((error: unknown) => error);
    expect(isStatementTimeout(cancelled)).toBe(true);
  });
});
