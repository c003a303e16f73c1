import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { Client } from 'pg';
import { startOwnRedis } from '../../test/support/redis-server';
import { cpuSeconds } from '../lib/cpu';
import { load, type LoadFigures, type LoadOptions } from '../lib/load';
import { freePort, freshDatabase } from '../lib/service';

const ENV = {
  NODE_ENV: 'production',
  JWT_SECRET: 'bench-secret-bench-secret-bench-secret-0123456789',
  LOG_LEVEL: 'warn',
  RATE_LIMIT_ORG_RPS: '1000000',
  RATE_LIMIT_ORG_BURST: '10000000',
  RATE_LIMIT_IP_RPS: '1000000',
  RATE_LIMIT_IP_BURST: '10000000',
  RATE_LIMIT_AUTH_RPS: '1000000',
  RATE_LIMIT_AUTH_BURST: '10000000',
  REDIS_URL: '',
};
const DURATION_SECONDS = 5;
const ROUNDS = 5;
const CONNECTIONS = 16;
/** The parent commit (main at d0e53ce), built with `git worktree add /tmp/teams-parent d0e53ce`. */
const PARENT_DIST = process.env.BENCH_PARENT_DIST ?? '/tmp/teams-parent/dist/main.js';
const CURRENT_DIST = resolve(__dirname, '../../dist/main.js');

interface Instance {
  baseUrl: string;
  child: ChildProcess;
}

async function start(main: string, env: Record<string, string>): Promise<Instance> {
  const port = await freePort();
  const child = spawn(process.execPath, [main], {
    env: { ...process.env, ...ENV, ...env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 300; attempt++) {
    if (child.exitCode !== null) throw new Error(`${main} exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${baseUrl}/health/ready`)).ok) return { baseUrl, child };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${main} did not become ready`);
}

async function stop(instance: Instance): Promise<void> {
  if (instance.child.exitCode !== null) return;
  const exited = new Promise((r) => instance.child.once('exit', r));
  instance.child.kill('SIGTERM');
  await exited;
}

async function call(
  method: string,
  url: string,
  body?: unknown,
  token?: string,
  organizationId?: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url, {
    method,
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(organizationId ? { 'x-organization-id': organizationId } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

async function signUp(baseUrl: string) {
  const response = await call('POST', `${baseUrl}/v1/auth/signup`, {
    email: `bench-${Date.now()}-${Math.random()}@example.com`,
    password: 'a benchmark password',
  });
  if (response.status !== 201) throw new Error(`signup: ${response.status}`);
  return {
    token: response.body.access_token as string,
    userId: (response.body.user as { id: string }).id,
    organizationId: (response.body.organization as { id: string }).id,
  };
}

/**
 * POST /v1/api-keys and DELETE /v1/api-keys/{id} with an admin API key on one service (the
 * DELETEs use keys made in SQL), and GET /v1/api-keys?limit=1 with an access token.
 */
async function measureKeys(instance: Instance, databaseUrl: string): Promise<Figures> {
  const owner = await signUp(instance.baseUrl);
  // The writes use an admin API key: no membership lookup, so only the audit log differs.
  const adminKey = await call(
    'POST',
    `${instance.baseUrl}/v1/api-keys`,
    { name: 'bench admin', scopes: ['admin'] },
    owner.token,
  );
  if (adminKey.status !== 201) throw new Error(`admin key: ${adminKey.status}`);
  const headers = {
    authorization: `Bearer ${adminKey.body.key as string}`,
    'content-type': 'application/json',
  };
  // An access-token read: the membership lookup on every request (cached on the parent commit).
  const tokenRead = await measured(instance, {
    url: `${instance.baseUrl}/v1/api-keys?limit=1`,
    headers: { authorization: `Bearer ${owner.token}` },
    connections: CONNECTIONS,
    durationSeconds: DURATION_SECONDS,
  });
  const create = await measured(instance, {
    url: `${instance.baseUrl}/v1/api-keys`,
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'bench', scopes: ['read'] }),
    connections: CONNECTIONS,
    durationSeconds: DURATION_SECONDS,
  });
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  const rows: Array<{ id: string }> = (
    await db.query(
      `INSERT INTO api_keys (organization_id, name, scopes, prefix, last_four, key_hash,
                             rate_limit_bucket_id)
       SELECT $1, 'doomed', '{read}', 'pk_bench', 'xxxx', sha256(gen_random_uuid()::text::bytea),
              gen_random_uuid()
         FROM generate_series(1, 40000) RETURNING id`,
      [owner.organizationId],
    )
  ).rows;
  await db.end();
  let next = 0;
  const revoke = await measured(instance, {
    url: `${instance.baseUrl}/v1/api-keys`,
    method: 'DELETE',
    headers,
    connections: CONNECTIONS,
    durationSeconds: DURATION_SECONDS,
    requests: [
      {
        method: 'DELETE',
        setupRequest: (request) => ({
          ...request,
          path: `/v1/api-keys/${rows[next++ % rows.length].id}`,
        }),
      },
    ],
  });
  return { create, revoke, token_read: tokenRead };
}

type Measured = LoadFigures & { cpu_us_per_request: number };
type Figures = { create: Measured; revoke: Measured; token_read: Measured };

/**
 * Load figures plus the service's CPU time per request: on a machine other work shares,
 * requests/s moves a lot with that work, CPU per request little.
 */
async function measured(instance: Instance, options: LoadOptions): Promise<Measured> {
  const before = cpuSeconds(instance.child.pid!);
  const figures = await load(options);
  const cpu = cpuSeconds(instance.child.pid!) - before;
  return { ...figures, cpu_us_per_request: Math.round((cpu * 1e6) / figures.requests) };
}

/**
 * 1. What the audit log costs: POST /v1/api-keys and DELETE /v1/api-keys/{id} on this branch
 *    (audit event written in the transaction) vs the parent commit (no audit log), both built,
 *    on databases of one PostgreSQL, interleaved rounds in one run. Goal: ≥ 0.9 of the rate.
 * 2. Revocation lag: two instances (separate processes) on one Redis; a member is removed on one
 *    (alternating), then the next request on each instance is checked. Goal: 100 of 100 refused.
 */
export async function run(): Promise<Record<string, unknown>> {
  if (!existsSync(PARENT_DIST)) throw new Error(`build the parent commit first: ${PARENT_DIST}`);
  const loadAverage = loadavg().map((value) => Number(value.toFixed(2)));
  const parentDb = await freshDatabase();
  const currentDb = await freshDatabase();
  // The parent's migrations must not see this branch's: each service gets its own database.
  const parent = await start(PARENT_DIST, { DATABASE_URL: parentDb.url });
  const current = await start(CURRENT_DIST, { DATABASE_URL: currentDb.url });
  const rounds: Array<Record<string, Figures>> = [];
  try {
    await measureKeys(parent, parentDb.url); // warm-up
    await measureKeys(current, currentDb.url);
    for (let round = 0; round < ROUNDS; round++) {
      const figures: Record<string, Figures> = {};
      const order =
        round % 2 === 0 ? (['parent', 'audit'] as const) : (['audit', 'parent'] as const);
      for (const variant of order) {
        figures[variant] =
          variant === 'parent'
            ? await measureKeys(parent, parentDb.url)
            : await measureKeys(current, currentDb.url);
      }
      rounds.push(figures);
    }
  } finally {
    await stop(parent);
    await stop(current);
    await parentDb.drop();
  }
  const mean = (variant: string, op: keyof Figures) =>
    Math.round(rounds.reduce((sum, r) => sum + r[variant][op].requests_per_sec, 0) / ROUNDS);
  const cpu = (variant: string, op: keyof Figures) =>
    Math.round(rounds.reduce((sum, r) => sum + r[variant][op].cpu_us_per_request, 0) / ROUNDS);
  // On a CPU-bound service requests/s goes as 1 / CPU per request: the same ratio, less noisy.
  const cpuRatio = (op: keyof Figures) => Number((cpu('parent', op) / cpu('audit', op)).toFixed(3));

  // Revocation lag across two instances on one Redis.
  const redis = await startOwnRedis();
  const env = { DATABASE_URL: currentDb.url, REDIS_URL: redis.url };
  const a = await start(CURRENT_DIST, env);
  const b = await start(CURRENT_DIST, env);
  const deleteMs: number[] = [];
  const refusedAfterMs: number[] = [];
  let refusedAtNextRequest = 0;
  const ITERATIONS = 100;
  try {
    const owner = await signUp(a.baseUrl);
    const member = await signUp(a.baseUrl);
    const db = new Client({ connectionString: currentDb.url });
    await db.connect();
    const read = (instance: Instance) =>
      call(
        'GET',
        `${instance.baseUrl}/v1/personalities`,
        undefined,
        member.token,
        owner.organizationId,
      );
    for (let i = 0; i < ITERATIONS; i++) {
      // Re-added in SQL as admin, then demoted through the API: the demotion makes both
      // instances forget whatever they cached ("not a member" from the previous iteration).
      await db.query(
        `INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, 'admin')`,
        [owner.organizationId, member.userId],
      );
      const demoted = await call(
        'PATCH',
        `${a.baseUrl}/v1/organizations/${owner.organizationId}/members/${member.userId}`,
        { role: 'member' },
        owner.token,
      );
      if (demoted.status !== 200) throw new Error(`demote: ${demoted.status}`);
      // Both instances serve (and, with Redis, cache) the membership.
      for (const instance of [a, b]) {
        const status = (await read(instance)).status;
        if (status !== 200) throw new Error(`member refused before removal: ${status}`);
      }
      const by = i % 2 === 0 ? a : b;
      const t0 = performance.now();
      const removed = await call(
        'DELETE',
        `${by.baseUrl}/v1/organizations/${owner.organizationId}/members/${member.userId}`,
        undefined,
        owner.token,
      );
      const t1 = performance.now();
      if (removed.status !== 204) throw new Error(`remove: ${removed.status}`);
      deleteMs.push(t1 - t0);
      const [onA, onB] = await Promise.all([read(a), read(b)]);
      if (onA.status === 403 && onB.status === 403) refusedAtNextRequest++;
      refusedAfterMs.push(performance.now() - t1);
    }
    await db.end();
  } finally {
    await stop(a);
    await stop(b);
    await redis.kill();
    await currentDb.drop();
  }
  const pct = (values: number[], p: number) => {
    const sorted = [...values].sort((x, y) => x - y);
    return Number(
      sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))].toFixed(2),
    );
  };
  const createRatio = mean('audit', 'create') / mean('parent', 'create');
  const revokeRatio = mean('audit', 'revoke') / mean('parent', 'revoke');
  return {
    load_average_at_start: loadAverage,
    connections: CONNECTIONS,
    duration_seconds: DURATION_SECONDS,
    audit_write_cost: {
      compared_with:
        'the parent commit d0e53ce built in /tmp/teams-parent, same run, interleaved rounds',
      rounds,
      mean_requests_per_sec: {
        create: { parent: mean('parent', 'create'), audit: mean('audit', 'create') },
        revoke: { parent: mean('parent', 'revoke'), audit: mean('audit', 'revoke') },
      },
      mean_cpu_us_per_request: {
        create: { parent: cpu('parent', 'create'), audit: cpu('audit', 'create') },
        revoke: { parent: cpu('parent', 'revoke'), audit: cpu('audit', 'revoke') },
      },
      ratio_create: Number(createRatio.toFixed(3)),
      ratio_revoke: Number(revokeRatio.toFixed(3)),
      ratio_create_from_cpu: cpuRatio('create'),
      ratio_revoke_from_cpu: cpuRatio('revoke'),
      goal: ">= 0.9 of the parent commit's requests/s",
    },
    uncached_membership_without_redis: {
      what: 'GET /v1/api-keys?limit=1 with an access token; parent: membership from a 5 s cache, this branch without REDIS_URL: read on every request',
      mean_requests_per_sec: {
        parent: mean('parent', 'token_read'),
        this_branch: mean('audit', 'token_read'),
      },
      ratio: Number((mean('audit', 'token_read') / mean('parent', 'token_read')).toFixed(3)),
      mean_cpu_us_per_request: {
        parent: cpu('parent', 'token_read'),
        this_branch: cpu('audit', 'token_read'),
      },
      ratio_from_cpu: cpuRatio('token_read'),
    },
    membership_revocation_across_two_instances: {
      iterations: ITERATIONS,
      refused_on_both_at_next_request: refusedAtNextRequest,
      delete_latency_ms: { p50: pct(deleteMs, 50), p99: pct(deleteMs, 99) },
      next_request_on_both_refused_within_ms: {
        p50: pct(refusedAfterMs, 50),
        p99: pct(refusedAfterMs, 99),
      },
      goal: '100 of 100 refused on both instances at the first request after the 204',
    },
  };
}
