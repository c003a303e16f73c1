import { load } from '../lib/load';
import { startService } from '../lib/service';
import { benchTenant, pgbench, sqlLiteral } from './support/data-plane';

const CREATE_OR_GET = (org: string, userId: string) => `
WITH inserted AS (
  INSERT INTO end_users (organization_id, user_id, metadata) VALUES (${org}, ${userId}, '{}')
  ON CONFLICT (organization_id, user_id) DO NOTHING
  RETURNING id, user_id, metadata, status, erase_after, created_at, updated_at)
SELECT true AS created, * FROM inserted
UNION ALL
SELECT false, id, user_id, metadata, status, erase_after, created_at, updated_at FROM end_users
 WHERE organization_id = ${org} AND user_id = ${userId} AND NOT EXISTS (SELECT 1 FROM inserted);
`;

/**
 * POST /v1/end-users (an existing user_id, and a new one per request) and POST /v1/respond with
 * an API key at 32 connections, each beside pgbench running the same SQL at the same
 * concurrency on the same database. Goal: ≥ 25% of pgbench's rate for POST /v1/end-users.
 */
export async function run(): Promise<Record<string, unknown>> {
  const service = await startService({ env: { LOG_LEVEL: 'info' } });
  try {
    const tenant = await benchTenant(service.baseUrl);
    const org = sqlLiteral(tenant.organizationId);
    const headers = { 'content-type': 'application/json', authorization: tenant.auth };
    const url = `${service.baseUrl}/v1/end-users`;
    await fetch(url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ user_id: 'bench-existing', metadata: { plan: 'pro' } }),
    });

    // Warm-up of every measured path: JIT, pool connections, per-connection prepared statements.
    const warm = { method: 'POST' as const, headers, durationSeconds: 3 };
    await load({ ...warm, url, body: '{"user_id":"bench-existing"}' });
    await load({ ...warm, url, body: '{"user_id":"bench-warm"}' });
    await load({
      ...warm,
      url: `${service.baseUrl}/v1/respond`,
      body: JSON.stringify({
        personality_id: tenant.personalityId,
        user_id: 'bench-warm',
        message: 'warming up',
      }),
    });

    const existing = await load({
      url,
      method: 'POST',
      headers,
      body: JSON.stringify({ user_id: 'bench-existing', metadata: { plan: 'pro' } }),
    });
    const existingSql = await pgbench(service.databaseUrl, CREATE_OR_GET(org, `'bench-existing'`));

    let counter = 0;
    const fresh = await load({
      url,
      method: 'POST',
      headers,
      requests: [
        {
          setupRequest: (request) => ({
            ...request,
            body: JSON.stringify({ user_id: `bench-new-${counter++}`, metadata: { n: counter } }),
          }),
        },
      ],
    });
    const freshSql = await pgbench(
      service.databaseUrl,
      `\\set n random(1, 1000000000000)\n${CREATE_OR_GET(org, `'pg-new-' || :n`)}`,
    );

    // /v1/respond over 1,000 end users, so conversations grow as they would.
    let turn = 0;
    const respond = await load({
      url: `${service.baseUrl}/v1/respond`,
      method: 'POST',
      headers,
      requests: [
        {
          setupRequest: (request) => ({
            ...request,
            body: JSON.stringify({
              personality_id: tenant.personalityId,
              user_id: `bench-talker-${turn++ % 1000}`,
              message: 'I am so happy today, thank you for listening!',
            }),
          }),
        },
      ],
    });
    const personality = sqlLiteral(tenant.personalityId);
    const respondSql = await pgbench(
      service.databaseUrl,
      `\\set u random(0, 999)
SELECT id, name, replies FROM personalities WHERE id = ${personality} AND organization_id = ${org};
SELECT m.role, m.content, m.emotion, m.created_at FROM end_users e
  JOIN memories m ON m.end_user_id = e.id AND m.personality_id = ${personality}
 WHERE e.organization_id = ${org} AND e.user_id = 'pg-talker-' || :u ORDER BY m.id DESC LIMIT 6;
${CREATE_OR_GET(org, `'pg-talker-' || :u`)}
BEGIN;
INSERT INTO memories (organization_id, end_user_id, personality_id, role, content, emotion, intensity, vocabulary_version, created_at)
SELECT ${org}, id, ${personality}, r.role, r.content, 'joy', 0.7, '2.0.0', now()
  FROM end_users, (VALUES ('user', 'I am so happy today, thank you for listening!'), ('personality', 'a reply of about the same length as the real one, give or take')) AS r(role, content)
 WHERE organization_id = ${org} AND user_id = 'pg-talker-' || :u;
WITH inserted AS (
  INSERT INTO relationship_months (organization_id, month, end_user_id, personality_id, first_active_at)
  SELECT ${org}, date_trunc('month', now() AT TIME ZONE 'UTC')::date, id, ${personality}, now()
    FROM end_users WHERE organization_id = ${org} AND user_id = 'pg-talker-' || :u
  ON CONFLICT DO NOTHING RETURNING organization_id, month)
INSERT INTO usage_monthly_counters (organization_id, month, active_relationships)
SELECT organization_id, month, 1 FROM inserted
ON CONFLICT (organization_id, month) DO UPDATE SET active_relationships = usage_monthly_counters.active_relationships + 1;
COMMIT;
`,
    );

    const ratio = (http: number, sql: number) => Number((http / sql).toFixed(3));
    return {
      connections: 32,
      duration_seconds: 10,
      pgbench_mode: '-M prepared (the service also uses named prepared statements)',
      post_end_users_existing: {
        http: existing,
        pgbench: existingSql,
        ratio_to_pgbench: ratio(existing.requests_per_sec, existingSql.transactions_per_sec),
      },
      post_end_users_new: {
        http: fresh,
        pgbench: freshSql,
        ratio_to_pgbench: ratio(fresh.requests_per_sec, freshSql.transactions_per_sec),
      },
      post_respond: {
        http: respond,
        pgbench: respondSql,
        ratio_to_pgbench: ratio(respond.requests_per_sec, respondSql.transactions_per_sec),
      },
      goal: 'POST /v1/end-users at >= 25% of pgbench running the same statement',
    };
  } finally {
    await service.stop();
  }
}
