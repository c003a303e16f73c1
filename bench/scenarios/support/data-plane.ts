import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers, read loosely
type Json = Record<string, any>;

async function post(url: string, body: unknown, auth?: string): Promise<Json> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
  return (await response.json()) as Json;
}

/**
 * A new organization with a read_write API key and a cloned personality, through the API; the
 * owner's access token too, for what only owners and admins may do.
 */
export async function benchTenant(baseUrl: string) {
  const signup = await post(`${baseUrl}/v1/auth/signup`, {
    email: `bench-${Date.now()}-${Math.random().toString(36).slice(2)}@example.test`,
    password: 'bench password long enough',
  });
  const key = await post(
    `${baseUrl}/v1/api-keys`,
    { name: 'bench', scopes: ['read_write'] },
    `Bearer ${signup.access_token}`,
  );
  const auth = `Bearer ${key.key}`;
  const personality = await post(
    `${baseUrl}/v1/personalities/from-catalog`,
    { slug: 'sage-mentor' },
    auth,
  );
  return {
    organizationId: signup.organization.id as string,
    auth,
    ownerAuth: `Bearer ${signup.access_token}`,
    personalityId: personality.id as string,
  };
}

export interface PgbenchFigures {
  transactions_per_sec: number;
  latency_average_ms: number;
  failed: number;
}

/** pgbench with a custom script at the load's concurrency: `-n -c 32 -j 2 -T 10 -M prepared`. */
export async function pgbench(
  databaseUrl: string,
  script: string,
  options: { clients?: number; seconds?: number } = {},
): Promise<PgbenchFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'pgbench-'));
  const file = join(dir, 'script.sql');
  writeFileSync(file, script);
  const { stdout } = await run(
    'pgbench',
    [
      '-n',
      '-c',
      String(options.clients ?? 32),
      '-j',
      '2',
      '-T',
      String(options.seconds ?? 10),
      '-M',
      'prepared',
      '-f',
      file,
      databaseUrl,
    ],
    { maxBuffer: 10 * 1024 * 1024 },
  );
  const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(stdout);
  const latency = /latency average = ([\d.]+) ms/.exec(stdout);
  const failed = /number of failed transactions: (\d+)/.exec(stdout);
  if (!tps) throw new Error(`unexpected pgbench output:\n${stdout}`);
  return {
    transactions_per_sec: Math.round(Number(tps[1])),
    latency_average_ms: Number(latency?.[1] ?? NaN),
    failed: Number(failed?.[1] ?? 0),
  };
}

/** Resident set size now and at its peak (VmHWM) of a process, in MiB. */
export function memoryOf(pid: number): { rss_mib: number; hwm_mib: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]);
  return { rss_mib: kib('VmRSS') / 1024, hwm_mib: kib('VmHWM') / 1024 };
}

export const sqlLiteral = (value: string) => `'${value.replace(/'/g, "''")}'`;
