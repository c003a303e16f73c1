import { Client } from 'pg';
import { ensureBuilt, httpTo, runBuilt, waitUntilReady } from './built-app';
import { createFreshDatabase } from './fresh-database';
import { freePort } from './ports';
import { createTestApp, type HttpTarget, rateLimitDefaults } from './test-app';

/** In this process (createTestApp), or the built `node dist/main.js` on a database of its own. */
export type ServiceKind = 'in-process' | 'built';

export interface Service extends HttpTarget {
  /** The Prometheus exposition its METRICS_PORT serves now. */
  metrics(): Promise<string>;
  /** A statement on the service's database, through a connection of the spec's own. */
  sql<Row = Record<string, unknown>>(query: string, params?: unknown[]): Promise<Row[]>;
  close(): Promise<void>;
}

/**
 * Starts the service of `kind` with `env`, so a spec that needs only HTTP (and SQL) can run the
 * same tests against both. The built service migrates its fresh database as it starts
 * (MIGRATE_ON_START defaults to true); the in-process one uses the run's database.
 */
export async function startService(
  kind: ServiceKind,
  env: Record<string, string>,
): Promise<Service> {
  const metricsPort = await freePort();
  const withMetrics = { ...env, METRICS_PORT: String(metricsPort) };
  const metrics = async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  if (kind === 'in-process') {
    const t = await createTestApp({ env: withMetrics });
    const db = await connect(process.env.DATABASE_URL);
    return {
      http: t.http,
      metrics,
      sql: async (query, params) => (await db.query(query, params)).rows,
      close: async () => {
        await db.end();
        await t.close();
      },
    };
  }
  ensureBuilt();
  const database = await createFreshDatabase('service', process.env.DATABASE_URL);
  const port = await freePort();
  const app = runBuilt('main.js', [], {
    ...rateLimitDefaults(),
    WEBHOOK_ALLOWED_PORTS: '1-65535',
    ...withMetrics,
    DATABASE_URL: database.url,
    PORT: String(port),
  });
  try {
    await waitUntilReady(app, port);
  } catch (error) {
    await app.stop();
    await database.drop();
    throw error;
  }
  const db = await connect(database.url);
  return {
    ...httpTo(`http://127.0.0.1:${port}`),
    metrics,
    sql: async (query, params) => (await db.query(query, params)).rows,
    close: async () => {
      await db.end();
      await app.stop();
      await database.drop();
    },
  };
}

async function connect(url: string | undefined): Promise<Client> {
  const client = new Client({ connectionString: url });
  await client.connect();
  return client;
}
