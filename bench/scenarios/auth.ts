import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { load, type LoadFigures } from '../lib/load';
import { freePort, freshDatabase } from '../lib/service';

const DURATION_SECONDS = 10;
const CONNECTIONS = 32;
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

const ratio = (part: LoadFigures, whole: number) =>
  Number((part.requests_per_sec / whole).toFixed(3));

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
    const measure = (path: string, headers?: Record<string, string>) =>
      load({
        url: `${baseUrl}${path}`,
        headers,
        connections: CONNECTIONS,
        durationSeconds: DURATION_SECONDS,
      });

    for (const [path, headers] of [
      ['/bench/twin/public', undefined],
      ['/bench/twin/authenticated', withKey],
      ['/bench/twin/authenticated', withToken],
      ['/v1/api-keys?limit=1', withKey],
    ] as const) {
      await load({ url: `${baseUrl}${path}`, headers, durationSeconds: 3 });
    }
    // Public measured before and after the authenticated runs: drift shows, and the mean is fair.
    const publicBefore = await measure('/bench/twin/public');
    const apiKey = await measure('/bench/twin/authenticated', withKey);
    const token = await measure('/bench/twin/authenticated', withToken);
    const publicAfter = await measure('/bench/twin/public');
    const publicMean = (publicBefore.requests_per_sec + publicAfter.requests_per_sec) / 2;
    const listWithKey = await measure('/v1/api-keys?limit=1', withKey);
    const listWithToken = await measure('/v1/api-keys?limit=1', withToken);
    const changelog = await measure('/v1/vocabularies/emotions/changelog');

    const keyRatio = ratio(apiKey, publicMean);
    const tokenRatio = ratio(token, publicMean);
    return {
      connections: CONNECTIONS,
      duration_seconds: DURATION_SECONDS,
      twin_public_before: publicBefore,
      twin_public_after: publicAfter,
      twin_api_key: apiKey,
      twin_access_token: token,
      ratio_api_key_to_public: keyRatio,
      ratio_access_token_to_public: tokenRatio,
      auth_cost_api_key_pct: Number(((1 - keyRatio) * 100).toFixed(1)),
      auth_cost_access_token_pct: Number(((1 - tokenRatio) * 100).toFixed(1)),
      api_keys_list_with_api_key: listWithKey,
      api_keys_list_with_access_token: listWithToken,
      public_changelog_route: changelog,
      goal: 'ratio_api_key_to_public and ratio_access_token_to_public >= 0.85, zero errors and non-2xx',
    };
  } finally {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    await database.drop();
  }
}
