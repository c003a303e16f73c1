import { spawn, spawnSync } from 'node:child_process';
import Redis from 'ioredis';
import { freePort } from './ports';

export interface OwnRedis {
  url: string;
  pid: number;
  /** SIGSTOP: the server keeps its connections but answers nothing (a slow Redis). */
  pause(): void;
  resume(): void;
  /** SIGKILL and wait for the process to end (Redis gone). */
  kill(): Promise<void>;
}

/**
 * A private, throw-away redis-server child process on a free port (no persistence), for tests
 * that stop Redis under the app: never the machine's shared one.
 */
export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 5_000;
  for (;;) {
    const probe = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch (error) {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      probe.disconnect();
    }
  }
  return {
    url,
    pid: child.pid!,
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGCONT');
        child.kill('SIGKILL');
      }
      await exited;
    },
  };
}

/** The machine's shared Redis, as the specs that need one reach it (E2E_REDIS_URL overrides). */
export const SHARED_REDIS_URL = process.env.E2E_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * Whether the machine's Redis answers, asked synchronously so a skip shows in the report; when
 * it does not, `spec` says on stderr what it skips. Under CI a spec runs its Redis tests anyway
 * (`|| process.env.CI`), so they fail rather than pass unseen.
 */
export function sharedRedisAnswers(spec: string, skipped: string): boolean {
  const ping = spawnSync('redis-cli', ['-u', SHARED_REDIS_URL, 'ping'], {
    encoding: 'utf8',
    timeout: 2_000,
  });
  const answers = ping.status === 0 && ping.stdout.trim() === 'PONG';
  if (!answers) {
    process.stderr.write(`${spec}: no Redis answers at ${SHARED_REDIS_URL}: ${skipped} SKIPPED\n`);
  }
  return answers;
}
