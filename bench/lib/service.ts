import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { freePort } from '../../test/support/ports';
import { createFreshDatabase, type FreshDatabase } from '../../test/support/fresh-database';

export interface RunningService {
  baseUrl: string;
  /** Its /metrics, on a port of its own. */
  metricsUrl: string;
  databaseUrl: string;
  pid: number;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** A fresh database on BENCH_DATABASE_URL's server, or on an embedded PostgreSQL of its own. */
export function freshDatabase(): Promise<FreshDatabase> {
  return createFreshDatabase('bench', process.env.BENCH_DATABASE_URL);
}

async function waitUntilReady(
  baseUrl: string,
  child: ChildProcess,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`service exited with code ${child.exitCode}`);
    try {
      const response = await fetch(`${baseUrl}/health/ready`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('service did not become ready');
}

/**
 * Starts the built service (`node dist/main.js`) on a fresh database, with rate limits raised so
 * they do not throttle the load, and waits for readiness. Its logs go to /dev/null.
 */
export async function startService(
  options: {
    env?: Record<string, string>;
    databaseUrl?: string;
    /** Another build's main.js (bench/scenarios/observability.ts runs the code before a change). */
    main?: string;
  } = {},
): Promise<RunningService> {
  const database = options.databaseUrl
    ? { url: options.databaseUrl, drop: async () => undefined }
    : await freshDatabase();
  const port = await freePort();
  // Metrics on, as in production, on a port of its own (the default one may be taken).
  const metricsPort = await freePort();
  const main = options.main ?? resolve(__dirname, '../../dist/main.js');
  const child = spawn(process.execPath, [main], {
    env: {
      ...process.env,
      NODE_ENV: 'production',
      JWT_SECRET: 'bench-secret-bench-secret-bench-secret-0123456789',
      DATABASE_URL: database.url,
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      LOG_LEVEL: 'info',
      RATE_LIMIT_ORG_RPS: '1000000',
      RATE_LIMIT_ORG_BURST: '10000000',
      RATE_LIMIT_IP_RPS: '1000000',
      RATE_LIMIT_IP_BURST: '10000000',
      // Sign-ups draw from the auth bucket: scenarios create tenants at will.
      RATE_LIMIT_AUTH_RPS: '1000000',
      RATE_LIMIT_AUTH_BURST: '10000000',
      REDIS_URL: '',
      ...options.env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitUntilReady(baseUrl, child);
  return {
    baseUrl,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    databaseUrl: database.url,
    pid: child.pid!,
    process: child,
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      await database.drop();
    },
  };
}

export { freePort };
