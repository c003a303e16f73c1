import type { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { runMigrationsExclusively } from '../../src/database/run-migrations';
import { moduleAlone } from '../support/module-alone';

/** The key runMigrationsExclusively locks (src/database/run-migrations.ts). */
const MIGRATION_LOCK_KEY = 727_301_001;

/**
 * runMigrationsExclusively on a real PostgreSQL while another instance holds the migration lock,
 * as a rolling deploy or a scaled-out start has it.
 */
describe('runMigrationsExclusively (real database)', () => {
  let moduleRef: TestingModule;
  const clients: Client[] = [];

  beforeAll(async () => {
    moduleRef = await moduleAlone([]);
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.end()));
    await moduleRef?.close();
  });

  async function session(): Promise<Client> {
    const client = new Client({ connectionString: process.env.DATABASE_URL });
    await client.connect();
    clients.push(client);
    return client;
  }

  it('waits for the lock without holding back the holder’s concurrent index build', async () => {
    const holder = await session();
    const builder = await session();
    await builder.query('CREATE TABLE run_migrations_probe (id int)');
    try {
      // Another instance is migrating: it holds the lock, and builds an index on a second session.
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      let done = false;
      const waiting = runMigrationsExclusively(moduleRef.get(DataSource)).then((applied) => {
        done = true;
        return applied;
      });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(done).toBe(false);
      // A waiter blocked in pg_advisory_lock would hold a snapshot the build waits for: past the
      // timeout the build fails with 57014.
      await builder.query("SET statement_timeout = '5s'");
      await builder.query(
        'CREATE INDEX CONCURRENTLY run_migrations_probe_idx ON run_migrations_probe (id)',
      );
      await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
      // Every migration has run (the suite's set-up): nothing is left to apply.
      expect(await waiting).toEqual([]);
    } finally {
      await builder.query('DROP TABLE run_migrations_probe');
    }
  });
});
