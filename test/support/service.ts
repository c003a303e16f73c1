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
  /** The service's database (a fresh one of its own). */
  databaseUrl: string;
  /** A statement on the service's database, through a connection of the spec's own. */
  sql<Row = Record<string, unknown>>(query: string, params?: unknown[]): Promise<Row[]>;
  close(): Promise<void>;
}

/**
 * Starts the service of `kind` with `env`, so a spec that needs only HTTP (and SQL) can run the
 * same tests against both, each on a fresh database of its own (the built service migrates it as
 * it starts: MIGRATE_ON_START defaults to true).
 */
export async function startService(
  kind: ServiceKind,
  env: Record<string, string>,
): Promise<Service> {
  const metricsPort = await freePort();
  const metrics = async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  // A database of its own for either kind: a spec may run workers fast (erasure every 200 ms)
  // that must not reach what other suites running beside it hold in the run's database.
  const database = await createFreshDatabase('service', process.env.DATABASE_URL);
  const withDatabase = { ...env, METRICS_PORT: String(metricsPort), DATABASE_URL: database.url };
  let stop: () => Promise<void>;
  let target: HttpTarget;
  try {
    if (kind === 'in-process') {
      const t = await createTestApp({ env: withDatabase });
      target = { http: t.http };
      stop = () => t.close();
    } else {
      ensureBuilt();
      const port = await freePort();
      const app = runBuilt('main.js', [], {
        ...rateLimitDefaults(),
        WEBHOOK_ALLOWED_PORTS: '1-65535',
        ...withDatabase,
        PORT: String(port),
      });
      stop = async () => void (await app.stop());
      try {
        await waitUntilReady(app, port);
      } catch (error) {
        await stop();
        throw error;
      }
      target = httpTo(`http://127.0.0.1:${port}`);
    }
  } catch (error) {
    await database.drop();
    throw error;
  }
  const db = await connect(database.url);
  return {
    ...target,
    metrics,
    databaseUrl: database.url,
    sql: async (query, params) => (await db.query(query, params)).rows,
    close: async () => {
      await db.end();
      await stop();
      await database.drop();
    },
  };
}

async function connect(url: string | undefined): Promise<Client> {
  const client = new Client({ connectionString: url });
  await client.connect();
  return client;
}
