import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from './service';

/** Starts the bare NestJS baseline answering `body` on every GET; returns its URL and a stop. */
export async function startBareBaseline(
  body: unknown,
): Promise<{ baseUrl: string; pid: number; stop(): Promise<void> }> {
  const bodyFile = join(tmpdir(), `bench-baseline-${process.pid}.json`);
  writeFileSync(bodyFile, JSON.stringify(body));
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      '-r',
      'ts-node/register/transpile-only',
      resolve(__dirname, '../baseline/bare-server.ts'),
      String(port),
      bodyFile,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const baseUrl = `http://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      if ((await fetch(`${baseUrl}/ping`)).ok) break;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    baseUrl,
    pid: child.pid!,
    stop: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
