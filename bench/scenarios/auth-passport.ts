import { type ChildProcess, spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { buildRevision } from '../lib/build-revision';
import { cpuSeconds } from '../lib/cpu';
import { load, type LoadFigures } from '../lib/load';
import { freePort, freshDatabase } from '../lib/service';

const DURATION_SECONDS = 8;
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
const root = resolve(__dirname, '../..');

type Measured = LoadFigures & { cpu_us_per_request: number };
type Build = 'before' | 'after';
type Credential = 'public' | 'api_key' | 'access_token';

async function startTwin(
  checkout: string,
  databaseUrl: string,
): Promise<{ baseUrl: string; child: ChildProcess }> {
  const port = await freePort();
  // Each twin its own metrics port: two on the default one would clash.
  const metricsPort = String(await freePort());
  const child = spawn(
    process.execPath,
    [
      '-r',
      'ts-node/register/transpile-only',
      join(checkout, 'bench/twins/auth-twin-server.ts'),
      String(port),
    ],
    {
      cwd: checkout,
      env: { ...process.env, ...ENV, DATABASE_URL: databaseUrl, METRICS_PORT: metricsPort },
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
 * Access tokens through passport (AuthGuard('jwt') + JwtStrategy on every request) against the
 * code before, which remembered verified tokens and skipped passport on a hit. The auth twin
 * (bench/scenarios/auth.ts: one handler mounted @Public() and @Scopes('read')) of both builds,
 * each on its own database, measured alternately in rotated order; CPU µs per request is the
 * figure that survives a busy machine, requests/s is recorded beside it.
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadAverage = loadavg().map((value) => Number(value.toFixed(2)));
  // The parent of issue 10's change (BENCH_BEFORE overrides it), as bench/scenarios/end-users.ts.
  const before = buildRevision(process.env.BENCH_BEFORE ?? '3d96b97');
  const databases = { before: await freshDatabase(), after: await freshDatabase() };
  const twins: Partial<Record<Build, { baseUrl: string; child: ChildProcess }>> = {};
  try {
    twins.before = await startTwin(before.dir, databases.before.url);
    twins.after = await startTwin(root, databases.after.url);
    const headers: Record<Build, Record<Credential, Record<string, string> | undefined>> = {
      before: { public: undefined, api_key: undefined, access_token: undefined },
      after: { public: undefined, api_key: undefined, access_token: undefined },
    };
    for (const build of ['before', 'after'] as const) {
      const { baseUrl } = twins[build]!;
      const signup = await post(`${baseUrl}/v1/auth/signup`, {
        email: `bench-${Date.now()}@example.com`,
        password: 'a benchmark password',
      });
      const token = signup.access_token as string;
      const key = (await post(`${baseUrl}/v1/api-keys`, { name: 'b', scopes: ['admin'] }, token))
        .key as string;
      headers[build].api_key = { authorization: `Bearer ${key}` };
      headers[build].access_token = { authorization: `Bearer ${token}` };
    }
    const path = (credential: Credential) =>
      credential === 'public' ? '/bench/twin/public' : '/bench/twin/authenticated';
    const measure = async (build: Build, credential: Credential): Promise<Measured> => {
      const { baseUrl, child } = twins[build]!;
      const start = cpuSeconds(child.pid!);
      const figures = await load({
        url: `${baseUrl}${path(credential)}`,
        headers: headers[build][credential],
        connections: CONNECTIONS,
        durationSeconds: DURATION_SECONDS,
      });
      const cpu = cpuSeconds(child.pid!) - start;
      return { ...figures, cpu_us_per_request: Math.round((cpu * 1e6) / figures.requests) };
    };
    const variants: Array<[Build, Credential]> = [];
    for (const build of ['before', 'after'] as const) {
      for (const credential of ['public', 'api_key', 'access_token'] as const) {
        variants.push([build, credential]);
        await load({
          url: `${twins[build]!.baseUrl}${path(credential)}`,
          headers: headers[build][credential],
          durationSeconds: 3,
        });
      }
    }
    const rounds: Array<Record<string, Measured>> = [];
    for (let round = 0; round < ROUNDS; round++) {
      const figures: Record<string, Measured> = {};
      for (let i = 0; i < variants.length; i++) {
        const [build, credential] = variants[(round * 2 + i) % variants.length];
        figures[`${build}.${credential}`] = await measure(build, credential);
      }
      rounds.push(figures);
    }
    const mean = (name: string, figure: 'requests_per_sec' | 'cpu_us_per_request') =>
      Math.round(rounds.reduce((sum, r) => sum + r[name][figure], 0) / ROUNDS);
    const summary: Record<string, Record<string, number>> = {};
    for (const build of ['before', 'after'] as const) {
      const cpu = (c: Credential) => mean(`${build}.${c}`, 'cpu_us_per_request');
      const rps = (c: Credential) => mean(`${build}.${c}`, 'requests_per_sec');
      summary[build] = {
        public_rps: rps('public'),
        api_key_rps: rps('api_key'),
        access_token_rps: rps('access_token'),
        public_cpu_us: cpu('public'),
        api_key_cpu_us: cpu('api_key'),
        access_token_cpu_us: cpu('access_token'),
        auth_cost_from_cpu_api_key_pct: Number(
          ((1 - cpu('public') / cpu('api_key')) * 100).toFixed(1),
        ),
        auth_cost_from_cpu_access_token_pct: Number(
          ((1 - cpu('public') / cpu('access_token')) * 100).toFixed(1),
        ),
        ratio_access_token_to_public: Number((rps('access_token') / rps('public')).toFixed(3)),
      };
    }
    return {
      connections: CONNECTIONS,
      duration_seconds: DURATION_SECONDS,
      load_average_at_start: loadAverage,
      before_revision: before.revision,
      rounds,
      summary,
      access_token_cpu_us_after_minus_before:
        summary.after.access_token_cpu_us - summary.before.access_token_cpu_us,
      goal: 'access-token auth cost < 15% (auth_cost_from_cpu_access_token_pct of after)',
    };
  } finally {
    for (const twin of Object.values(twins)) {
      const exited = new Promise((r) => twin.child.once('exit', r));
      twin.child.kill('SIGTERM');
      await exited;
    }
    await databases.before.drop();
    await databases.after.drop();
    before.cleanup();
  }
}
