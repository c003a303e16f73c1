import { get, type ClientRequest } from 'node:http';
import { Client } from 'pg';
import { load } from '../lib/load';
import { startService } from '../lib/service';
import { benchTenant } from './support/data-plane';

const MEMORIES = 50_000;
const STALLED = 10;

/** Starts an export and never reads its body: the client that stops reading. */
function stalledExport(
  url: string,
  auth: string,
): Promise<{ status: number; request: ClientRequest }> {
  return new Promise((resolve, reject) => {
    const request = get(url, { headers: { authorization: auth } }, (response) => {
      response.pause();
      resolve({ status: response.statusCode ?? 0, request });
    });
    request.on('error', (error) => (request.destroyed ? undefined : reject(error)));
  });
}

/**
 * One organization opens 10 exports of a 50,000-memory end user and stops reading them; another
 * organization's `GET /v1/end-users` and `/health/ready` are loaded before and during the stall.
 * Goal (contract §14): the other tenant's latency as before; 4 exports held, 6 refused with 429.
 * Before the stream budget, the other tenant got 500 after 5 s (the pool was pinned).
 */
export async function run(): Promise<Record<string, unknown>> {
  const service = await startService();
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  const held: ClientRequest[] = [];
  try {
    const hoarder = await benchTenant(service.baseUrl);
    const other = await benchTenant(service.baseUrl);
    const userId = 'bench-hoarded';
    const created = await fetch(`${service.baseUrl}/v1/end-users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: hoarder.auth },
      body: JSON.stringify({ user_id: userId }),
    });
    if (created.status !== 201) throw new Error(`create: ${created.status}`);
    await db.query(
      `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content)
       SELECT $1, e.id, $2, 'user', 'Memory ' || g || ': ' || repeat('some words, ', 30)
         FROM end_users e, generate_series(1, $3) g
        WHERE e.organization_id = $1 AND e.user_id = $4`,
      [hoarder.organizationId, hoarder.personalityId, MEMORIES, userId],
    );

    const measure = async () => ({
      end_users: await load({
        url: `${service.baseUrl}/v1/end-users?limit=5`,
        headers: { authorization: other.auth },
        connections: 8,
        durationSeconds: 8,
      }),
      ready: await load({
        url: `${service.baseUrl}/health/ready`,
        connections: 2,
        durationSeconds: 3,
      }),
    });
    await measure(); // warm-up
    const before = await measure();

    const url = `${service.baseUrl}/v1/end-users/${userId}/export`;
    const stalled = await Promise.all(
      Array.from({ length: STALLED }, () => stalledExport(url, hoarder.auth)),
    );
    held.push(...stalled.map((s) => s.request));
    const during = await measure();
    const idleInTransaction = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND state = 'idle in transaction'`,
    );

    return {
      stalled_exports: STALLED,
      stalled_statuses: stalled.map((s) => s.status).sort(),
      idle_in_transaction_during: idleInTransaction.rows[0].n,
      other_tenant_before: before,
      other_tenant_during: during,
      p99_ratio_during_vs_before: Number(
        (during.end_users.latency_p99_ms / Math.max(1, before.end_users.latency_p99_ms)).toFixed(2),
      ),
      goal: "other tenant's latency as before (no 5xx); 4 exports held, 6 answered 429",
    };
  } finally {
    for (const request of held) request.destroy();
    await db.end();
    await service.stop();
  }
}
