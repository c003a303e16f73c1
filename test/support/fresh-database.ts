import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { startEmbeddedPostgres } from '../../src/database/embedded-postgres';

export interface FreshDatabase {
  /** URL of the new, empty database. */
  url: string;
  /** Drops the database, and stops the embedded server if one was started for it. */
  drop(): Promise<void>;
}

/**
 * A new database named `<prefix>_<time>_<random>` on the server of `serverUrl`, or, without one,
 * on an embedded PostgreSQL started in a temporary directory (deleted when it stops). Used by the
 * e2e suite and the benchmarks, so leftovers of one run never change another's result.
 */
export async function createFreshDatabase(
  prefix: string,
  serverUrl?: string,
): Promise<FreshDatabase> {
  let adminUrl = serverUrl;
  let stopEmbedded: (() => Promise<void>) | undefined;
  if (!adminUrl) {
    const embedded = await startEmbeddedPostgres({
      dataDir: mkdtempSync(join(tmpdir(), `personality-api-${prefix}-`)),
      port: 0,
      database: 'postgres',
      persistent: false,
    });
    adminUrl = embedded.url;
    stopEmbedded = embedded.stop;
  }
  const name = `${prefix}_${Date.now()}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();

  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await client.end();
      await stopEmbedded?.();
    },
  };
}
