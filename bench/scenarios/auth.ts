import { type ChildProcess, spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { load, type LoadFigures } from '../lib/load';
import { freePort, freshDatabase } from '../lib/service';
import { cpuSeconds } from '../lib/cpu';

const DURATION_SECONDS = 10;
const CONNECTIONS = 32;
const ROUNDS = 3;
const ENV = {
  NODE_ENV: 'production',
  JWT_SECRET: 'bench-secret-bench-secret-bench-secret-0123456789',
  LOG_LEVEL: 'info',
  RATE_LIMIT_ORG_RPS: '1000000',
  RATE_LIMIT_ORG_BURST: '10000000',
  RATE_LIMIT_IP_RPS: '1000000',
  RATE_LIMIT_IP_BURST: '10000000',
  RATE_LIMIT_AUTH_RPS: '1000000',
  RATE_LIMIT_AUTH_BURST: '10000000',
  REDIS_URL: '',
};

/** CPU seconds (user + system) a process has used so far, from /proc (Linux). */

type Measured = LoadFigures & { cpu_us_per_request: number };

async function startTwin(databaseUrl: string): Promise<{ baseUrl: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      '-r',
      'ts-node/register/transpile-only',
      resolve(__dirname, '../twins/auth-twin-server.ts'),
      String(port),
    ],
    {
      env: { ...process.env, ...ENV, DATABASE_URL: databaseUrl },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  const baseUrl = `http://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 300; attempt++) {
    if (child.exitCode !== null) throw new Error(`twin server exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${baseUrl}/health/ready`)).ok) return { baseUrl, child };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('twin server did not become ready');
}

async function post(url: string, body: unknown, token?: string): Promise<Record<string, unknown>> {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
  return (await response.json()) as Record<string, unknown>;
}

/**
 * What authentication costs, in the same run on the built service:
 * - the twin pair: one handler (the changelog, in memory, no database) mounted @Public() and
 *   @Scopes('read'), called without a credential, with an API key and with an access token. Only
 *   the guard differs, so the gap is the cost of authentication and nothing else. Goal: each
 *   authenticated figure ≥ 85% of the public one's requests/s (auth cost < 15%).
 * - for the record, a real authenticated read (GET /v1/api-keys?limit=1, one indexed query) with
 *   both credentials, and the public changelog route.
 * Both credentials are checked on the hot path without argon2 and without a database write:
 * the key by SHA-256 through a 5 s cache, the token by HMAC and a cached token version.
 */
export async function run(): Promise<Record<string, unknown>> {
  // Other work on the machine skews every figure; it is recorded beside them.
  const loadAverage = loadavg().map((value) => Number(value.toFixed(2)));
  const database = await freshDatabase();
  const { baseUrl, child } = await startTwin(database.url);
  try {
    const signup = await post(`${baseUrl}/v1/auth/signup`, {
      email: `bench-${Date.now()}@example.com`,
      password: 'a benchmark password',
    });
    const accessToken = signup.access_token as string;
    const key = (
      await post(`${baseUrl}/v1/api-keys`, { name: 'bench', scopes: ['admin'] }, accessToken)
    ).key as string;
    const withKey = { authorization: `Bearer ${key}` };
    const withToken = { authorization: `Bearer ${accessToken}` };
    // Besides requests/s, the service's CPU time per request: other load on a shared machine
    // moves requests/s a lot, CPU per request little.
    const measure = async (path: string, headers?: Record<string, string>): Promise<Measured> => {
      const before = cpuSeconds(child.pid!);
      const figures = await load({
        url: `${baseUrl}${path}`,
        headers,
        connections: CONNECTIONS,
        durationSeconds: DURATION_SECONDS,
      });
      const cpu = cpuSeconds(child.pid!) - before;
      return { ...figures, cpu_us_per_request: Math.round((cpu * 1e6) / figures.requests) };
    };

    for (const [path, headers] of [
      ['/bench/twin/public', undefined],
      ['/bench/twin/authenticated', withKey],
      ['/bench/twin/authenticated', withToken],
      ['/v1/api-keys?limit=1', withKey],
    ] as const) {
      await load({ url: `${baseUrl}${path}`, headers, durationSeconds: 3 });
    }
    // Interleaved rounds with the order rotated, so drift in the machine's load and whatever the
    // previous run leaves behind (garbage, JIT state) hit the three variants alike.
    const variants = {
      public: () => measure('/bench/twin/public'),
      api_key: () => measure('/bench/twin/authenticated', withKey),
      access_token: () => measure('/bench/twin/authenticated', withToken),
    };
    const order = ['public', 'api_key', 'access_token'] as const;
    const rounds: Array<Record<(typeof order)[number], Measured>> = [];
    for (let round = 0; round < ROUNDS; round++) {
      const figures: Partial<Record<(typeof order)[number], Measured>> = {};
      for (let i = 0; i < order.length; i++) {
        const variant = order[(round + i) % order.length];
        figures[variant] = await variants[variant]();
      }
      rounds.push(figures as Record<(typeof order)[number], Measured>);
    }
    type Variant = 'public' | 'api_key' | 'access_token';
    const mean = (variant: Variant, figure: 'requests_per_sec' | 'cpu_us_per_request') =>
      Math.round(rounds.reduce((sum, r) => sum + r[variant][figure], 0) / ROUNDS);
    const [publicRps, keyRps, tokenRps] = (['public', 'api_key', 'access_token'] as const).map(
      (variant) => mean(variant, 'requests_per_sec'),
    );
    const [publicCpu, keyCpu, tokenCpu] = (['public', 'api_key', 'access_token'] as const).map(
      (variant) => mean(variant, 'cpu_us_per_request'),
    );
    // On a CPU-bound server requests/s goes as 1 / CPU per request: the same cost, measured
    // without the noise of whatever else the machine runs.
    const cpuCost = (cpu: number) => Number(((1 - publicCpu / cpu) * 100).toFixed(1));
    const listWithKey = await measure('/v1/api-keys?limit=1', withKey);
    const listWithToken = await measure('/v1/api-keys?limit=1', withToken);
    const changelog = await measure('/v1/vocabularies/emotions/changelog');

    return {
      connections: CONNECTIONS,
      duration_seconds: DURATION_SECONDS,
      load_average_at_start: loadAverage,
      twin_rounds: rounds,
      twin_mean_requests_per_sec: { public: publicRps, api_key: keyRps, access_token: tokenRps },
      twin_mean_cpu_us_per_request: { public: publicCpu, api_key: keyCpu, access_token: tokenCpu },
      auth_cost_from_cpu_api_key_pct: cpuCost(keyCpu),
      auth_cost_from_cpu_access_token_pct: cpuCost(tokenCpu),
      ratio_api_key_to_public: Number((keyRps / publicRps).toFixed(3)),
      ratio_access_token_to_public: Number((tokenRps / publicRps).toFixed(3)),
      auth_cost_api_key_pct: Number(((1 - keyRps / publicRps) * 100).toFixed(1)),
      auth_cost_access_token_pct: Number(((1 - tokenRps / publicRps) * 100).toFixed(1)),
      api_keys_list_with_api_key: listWithKey,
      api_keys_list_with_access_token: listWithToken,
      public_changelog_route: changelog,
      goal: 'auth cost < 15% of requests/s (ratio >= 0.85; auth_cost_from_cpu_* < 15 on a busy machine), zero errors and non-2xx',
    };
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    await database.drop();
  }
}
