import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import type { HttpTarget } from './test-app';
import { sleep } from './wait';

const root = join(__dirname, '..', '..');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * Builds dist/ as `npm run build` does (`nest build`, then the console into dist/web) unless it is
 * newer than every file of its sources, so specs can run the built `node dist/main.js` and
 * `node dist/cli.js`, and the console's files are there, on a clean clone. `nest build` empties
 * dist/, so the console is built again after it.
 */
export function ensureBuilt(): void {
  const main = join(root, 'dist', 'main.js');
  const src = newestMtime(join(root, 'src'));
  let rebuilt = false;
  if (!existsSync(main) || statSync(main).mtimeMs <= src) {
    execFileSync(process.execPath, [require.resolve('@nestjs/cli/bin/nest.js'), 'build'], {
      cwd: root,
      stdio: 'pipe',
    });
    rebuilt = true;
  }
  const page = join(root, 'dist', 'web', 'index.html');
  if (
    rebuilt ||
    !existsSync(page) ||
    statSync(page).mtimeMs <= Math.max(src, newestMtime(join(root, 'web')))
  ) {
    execFileSync(process.execPath, [join(root, 'web', 'build.mjs')], { cwd: root, stdio: 'pipe' });
  }
}

export interface BuiltProcess {
  child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  exited: Promise<number | null>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** Runs `node dist/<script> …args` with the test's environment plus `env`. */
export function runBuilt(
  script: 'main.js' | 'cli.js',
  args: string[],
  env: Record<string, string>,
): BuiltProcess {
  return run([join(root, 'dist', script), ...args], env);
}

/**
 * Runs the service from its sources, as main.ts starts it (transpiled by ts-node, not built),
 * with the test's environment plus `env`.
 */
export function runFromSource(env: Record<string, string>): BuiltProcess {
  return run(['-r', 'ts-node/register/transpile-only', join(root, 'src', 'main.ts')], env);
}

function run(args: string[], env: Record<string, string>): BuiltProcess {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return {
    child,
    output: () => output,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Polls /health/ready until it answers 200; fails with the process's output if it exits. */
export async function waitUntilReady(
  app: BuiltProcess,
  port: number,
  timeoutMs = 45_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health/ready`)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || app.child.exitCode !== null)
      throw new Error(`service did not start:\n${app.output()}`);
    await sleep(200);
  }
}

/** The spec helpers' HTTP target for a built service listening on `base` (`http://127.0.0.1:PORT`). */
export function httpTo(base: string): HttpTarget {
  return { http: () => request(base) };
}
