import { createOrGetStatement } from '../../src/end-users/end-users.repository';
import { buildRevision } from '../lib/build-revision';
import { cpuSeconds } from '../lib/cpu';
import { load, type LoadFigures } from '../lib/load';
import { type RunningService, startService } from '../lib/service';
import { benchTenant, pgbench, type PgbenchFigures, sqlLiteral } from './support/data-plane';
import { backendCpu, cpuBetween } from './support/db-cpu';
import { median } from './support/stats';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const MESSAGE = 'I am so happy today, thank you for listening!';
/** The code before issue 10's data-access change (BENCH_BEFORE overrides it). */
const BEFORE = process.env.BENCH_BEFORE ?? '3d96b97';

/**
 * The service's own create-or-get statement, webhook event step included, as a pgbench script:
 * its `$n` parameters become the literals the service would bind.
 */
const CREATE_OR_GET = (org: string, userId: string): string => {
  const at = new Date();
  const statement = createOrGetStatement('<org>', '<user>', '{}', at);
  const literals = new Map<unknown, string>([
    ['<org>', org],
    ['<user>', userId],
    ['{}', `'{}'`],
    ['end_user.created', `'end_user.created'`],
    // The service binds its Clock's time; the database's is the same moment.
    [at, 'now()'],
  ]);
  return `${statement.text.replace(/\$(\d+)/g, (_, n: string) => literals.get(statement.values[Number(n) - 1])!)};\n`;
};

type Tenant = Awaited<ReturnType<typeof benchTenant>>;

/**
 * pgbench, tried again while the server refuses its 32 connections: the server's
 * max_connections is shared with whatever else runs on the machine.
 */
async function pgbenchWhenConnectable(
  databaseUrl: string,
  script: string,
): Promise<PgbenchFigures> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await pgbench(databaseUrl, script);
    } catch (error) {
      if (attempt >= 10 || !String(error).includes('too many clients')) throw error;
      await new Promise((r) => setTimeout(r, 5000));
    }
  }
}

const ratio = (a: number, b: number) => Number((a / b).toFixed(3));

function medians(rounds: Measured[]) {
  return {
    requests_per_sec: median(rounds.map((r) => r.requests_per_sec)),
    service_cpu_ms_per_request: median(rounds.map((r) => r.service_cpu_ms_per_request)),
    db_cpu_ms_per_request: median(rounds.map((r) => r.db_cpu_ms_per_request)),
    latency_p50_ms: median(rounds.map((r) => r.latency_p50_ms)),
    latency_p99_ms: median(rounds.map((r) => r.latency_p99_ms)),
    errors_and_non_2xx: rounds.reduce((sum, r) => sum + r.errors + r.non_2xx, 0),
  };
}

type Measured = LoadFigures & { service_cpu_ms_per_request: number; db_cpu_ms_per_request: number };

/**
 * 10 s of POSTs at 32 connections, with the CPU time per request of the service and of the
 * PostgreSQL processes serving its pool: less sensitive to the machine's neighbours than
 * requests/s, which on a shared machine swing with everything else that runs.
 */
async function post(
  service: RunningService,
  tenant: Tenant,
  path: string,
  body: () => string,
): Promise<Measured> {
  const serviceBefore = cpuSeconds(service.pid);
  const dbBefore = await backendCpu(service.databaseUrl);
  const figures = await load({
    url: `${service.baseUrl}${path}`,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: tenant.auth },
    requests: [{ setupRequest: (request) => ({ ...request, body: body() }) }],
  });
  const serviceSeconds = cpuSeconds(service.pid) - serviceBefore;
  const dbSeconds = cpuBetween(dbBefore, await backendCpu(service.databaseUrl));
  const perRequest = (seconds: number) =>
    Number(((seconds * 1000) / Math.max(1, figures.requests)).toFixed(3));
  return {
    ...figures,
    service_cpu_ms_per_request: perRequest(serviceSeconds),
    db_cpu_ms_per_request: perRequest(dbSeconds),
  };
}

let fresh = 0;
const newEndUser = () =>
  JSON.stringify({ user_id: `bench-new-${fresh++}`, metadata: { n: fresh } });

/** A conversation over 1,000 end users (they exist after the first lap and their history grows). */
const talker = (tenant: Tenant) => {
  let turn = 0;
  return () =>
    JSON.stringify({
      personality_id: tenant.personalityId,
      user_id: `bench-talker-${turn++ % 1000}`,
      message: MESSAGE,
    });
};

/** A first contact on every request: the end user is created by the call. */
const stranger = (tenant: Tenant, tag: string) => {
  let turn = 0;
  return () =>
    JSON.stringify({
      personality_id: tenant.personalityId,
      user_id: `bench-stranger-${tag}-${turn++}`,
      message: MESSAGE,
    });
};

/**
 * POST /v1/end-users (an existing user_id, and a new one per request) beside pgbench running the
 * same SQL at the same concurrency on the same database, and POST /v1/respond of this build
 * beside the build of BENCH_BEFORE, interleaved round by round so both see the same neighbours.
 * Goals (issue 10): new end user >= 0.2 of pgbench; respond >= 1.5x the code before.
 */
export async function run(): Promise<Record<string, unknown>> {
  const before = buildRevision(BEFORE);
  let after: RunningService | undefined;
  let old: RunningService | undefined;
  try {
    after = await startService({ env: { LOG_LEVEL: 'info' } });
    old = await startService({ env: { LOG_LEVEL: 'info' }, main: before.main });
    const tenant = await benchTenant(after.baseUrl);
    const oldTenant = await benchTenant(old.baseUrl);
    const org = sqlLiteral(tenant.organizationId);
    const existingBody = JSON.stringify({ user_id: 'bench-existing', metadata: { plan: 'pro' } });
    const talkers = { after: talker(tenant), before: talker(oldTenant) };
    const strangers = { after: stranger(tenant, 'a'), before: stranger(oldTenant, 'b') };

    // Warm-up of every measured path: JIT, pool connections, per-connection prepared statements.
    const warm = { method: 'POST' as const, durationSeconds: 3 };
    for (const [service, t] of [
      [after, tenant],
      [old, oldTenant],
    ] as const) {
      const headers = { 'content-type': 'application/json', authorization: t.auth };
      await load({ ...warm, headers, url: `${service.baseUrl}/v1/end-users`, body: existingBody });
      await load({
        ...warm,
        headers,
        url: `${service.baseUrl}/v1/respond`,
        body: JSON.stringify({ personality_id: t.personalityId, user_id: 'w', message: 'hi' }),
      });
    }

    const existing = await post(after, tenant, '/v1/end-users', () => existingBody);
    const existingSql = await pgbenchWhenConnectable(
      after.databaseUrl,
      CREATE_OR_GET(org, `'bench-existing'`),
    );

    const rounds: Array<{
      new_end_user: Measured;
      new_end_user_pgbench: PgbenchFigures;
      new_end_user_before: Measured;
      respond_known: { after: Measured; before: Measured };
      respond_first_contact: { after: Measured; before: Measured };
    }> = [];
    for (let i = 0; i < ROUNDS; i++) {
      const newHttp = await post(after, tenant, '/v1/end-users', newEndUser);
      const newBefore = await post(old, oldTenant, '/v1/end-users', newEndUser);
      const newSql = await pgbenchWhenConnectable(
        after.databaseUrl,
        `\\set n random(1, 1000000000000)\n${CREATE_OR_GET(org, `'pg-new-' || :n`)}`,
      );
      // Alternating which build goes first, so neither always follows the other's load.
      const order = i % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const);
      const known = {} as { after: Measured; before: Measured };
      const first = {} as { after: Measured; before: Measured };
      for (const variant of order) {
        const [service, t] = variant === 'after' ? [after, tenant] : [old, oldTenant];
        known[variant] = await post(service, t, '/v1/respond', talkers[variant]);
      }
      for (const variant of order) {
        const [service, t] = variant === 'after' ? [after, tenant] : [old, oldTenant];
        first[variant] = await post(service, t, '/v1/respond', strangers[variant]);
      }
      rounds.push({
        new_end_user: newHttp,
        new_end_user_pgbench: newSql,
        new_end_user_before: newBefore,
        respond_known: known,
        respond_first_contact: first,
      });
    }

    const newHttp = medians(rounds.map((r) => r.new_end_user));
    const newBeforeHttp = medians(rounds.map((r) => r.new_end_user_before));
    const newSqlTps = median(rounds.map((r) => r.new_end_user_pgbench.transactions_per_sec));
    const respondOf = (key: 'respond_known' | 'respond_first_contact') => {
      const afterMedian = medians(rounds.map((r) => r[key].after));
      const beforeMedian = medians(rounds.map((r) => r[key].before));
      return {
        after: afterMedian,
        before: beforeMedian,
        after_to_before_rps: ratio(afterMedian.requests_per_sec, beforeMedian.requests_per_sec),
        before_to_after_service_cpu: ratio(
          beforeMedian.service_cpu_ms_per_request,
          afterMedian.service_cpu_ms_per_request,
        ),
        before_to_after_db_cpu: ratio(
          beforeMedian.db_cpu_ms_per_request,
          afterMedian.db_cpu_ms_per_request,
        ),
        per_round_after_to_before: rounds.map((r) =>
          ratio(r[key].after.requests_per_sec, r[key].before.requests_per_sec),
        ),
      };
    };
    return {
      connections: 32,
      duration_seconds: 10,
      rounds: ROUNDS,
      before_revision: before.revision,
      pgbench_mode: '-M prepared (the service also uses named prepared statements)',
      post_end_users_existing: {
        http: existing,
        pgbench: existingSql,
        ratio_to_pgbench: ratio(existing.requests_per_sec, existingSql.transactions_per_sec),
      },
      post_end_users_new: {
        http: newHttp,
        pgbench_transactions_per_sec: newSqlTps,
        ratio_to_pgbench: ratio(newHttp.requests_per_sec, newSqlTps),
        per_round_ratio: rounds.map((r) =>
          ratio(r.new_end_user.requests_per_sec, r.new_end_user_pgbench.transactions_per_sec),
        ),
        before: newBeforeHttp,
        before_ratio_to_pgbench: ratio(newBeforeHttp.requests_per_sec, newSqlTps),
      },
      post_respond_known_end_users: {
        user_ids: '1,000 end users in turn (known after the first lap; histories grow)',
        ...respondOf('respond_known'),
      },
      post_respond_first_contact: {
        user_ids: 'a new user_id on every request (the call creates the end user)',
        ...respondOf('respond_first_contact'),
      },
      per_round: rounds,
      goals: {
        post_end_users_new: '>= 0.2 of pgbench running the same statement',
        post_respond: `>= 1.5x the requests/s of ${BEFORE} in the same run`,
      },
    };
  } finally {
    await after?.stop();
    await old?.stop();
    before.cleanup();
  }
}
