import { Client } from 'pg';
import { startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { median } from './support/stats';

const ROWS_PER_SIDE = 1_000; // 1,000 end users × 1,000 personalities = 1,000,000 relationships

async function timed<T>(work: () => Promise<T>): Promise<[number, T]> {
  const start = process.hrtime.bigint();
  const result = await work();
  return [Number(process.hrtime.bigint() - start) / 1e6, result];
}

/**
 * GET /v1/usage/active-relationships with 1,000,000 relationships in the month, against
 * COUNT(DISTINCT …) over the activity rows (one memory per relationship, the least a naive
 * design would scan) in the same run. Goal: < 5 ms median, ≥ 100× faster than the scan.
 */
export async function run(): Promise<Record<string, unknown>> {
  const service = await startService();
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  try {
    const tenant = await benchTenant(service.baseUrl);
    const month = new Date().toISOString().slice(0, 7);
    const org = tenant.organizationId;

    const [seedMs] = await timed(async () => {
      await db.query(
        `INSERT INTO end_users (organization_id, user_id)
         SELECT $1, 'bench-user-' || g FROM generate_series(1, $2) g`,
        [org, ROWS_PER_SIDE],
      );
      await db.query(
        `INSERT INTO personalities (organization_id, source_slug, source_version, name, description,
                                    traits, voice, system_prompt, replies)
         SELECT $1, source_slug, source_version, name || g, description, traits, voice,
                system_prompt, replies
           FROM personalities, generate_series(1, $2) g WHERE id = $3`,
        [org, ROWS_PER_SIDE, tenant.personalityId],
      );
      await db.query(
        `INSERT INTO relationship_months (organization_id, month, end_user_id, personality_id, first_active_at)
         SELECT $1, $2::date, e.id, p.id, now()
           FROM end_users e CROSS JOIN personalities p
          WHERE e.organization_id = $1 AND p.organization_id = $1 AND p.id <> $3`,
        [org, `${month}-01`, tenant.personalityId],
      );
      await db.query(
        `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content, created_at)
         SELECT organization_id, end_user_id, personality_id, 'user', 'hello', now()
           FROM relationship_months WHERE organization_id = $1`,
        [org],
      );
      await db.query(
        `INSERT INTO usage_monthly_counters (organization_id, month, active_relationships)
         SELECT organization_id, month, count(*) FROM relationship_months
          WHERE organization_id = $1 GROUP BY organization_id, month`,
        [org],
      );
      await db.query('ANALYZE');
    });

    const url = `${service.baseUrl}/v1/usage/active-relationships?month=${month}`;
    const headers = { authorization: tenant.auth };
    const first = (await (await fetch(url, { headers })).json()) as {
      active_relationships: number;
    };
    if (first.active_relationships !== ROWS_PER_SIDE * ROWS_PER_SIDE) {
      throw new Error(`expected 1,000,000 relationships, got ${first.active_relationships}`);
    }
    const httpMs: number[] = [];
    for (let i = 0; i < 200; i++) {
      const [ms] = await timed(async () => (await fetch(url, { headers })).arrayBuffer());
      httpMs.push(ms);
    }
    const counterSqlMs: number[] = [];
    for (let i = 0; i < 200; i++) {
      const [ms] = await timed(() =>
        db.query(
          'SELECT active_relationships FROM usage_monthly_counters WHERE organization_id = $1 AND month = $2',
          [org, `${month}-01`],
        ),
      );
      counterSqlMs.push(ms);
    }
    const scanMs: number[] = [];
    let scanned = 0;
    for (let i = 0; i < 5; i++) {
      const [ms, result] = await timed(() =>
        db.query<{ n: string }>(
          `SELECT count(DISTINCT (end_user_id, personality_id)) AS n FROM memories
            WHERE organization_id = $1 AND created_at >= $2::date AND created_at < ($2::date + interval '1 month')`,
          [org, `${month}-01`],
        ),
      );
      scanMs.push(ms);
      scanned = Number(result.rows[0].n);
    }
    const usageMedian = median(httpMs);
    return {
      relationships_in_month: first.active_relationships,
      seed_seconds: Number((seedMs / 1000).toFixed(1)),
      usage_read_http_median_ms: Number(usageMedian.toFixed(3)),
      usage_read_http_p99_ms: Number(
        [...httpMs].sort((a, b) => a - b)[Math.floor(httpMs.length * 0.99)].toFixed(3),
      ),
      usage_read_sql_median_ms: Number(median(counterSqlMs).toFixed(3)),
      count_distinct_over_activity_rows_median_ms: Number(median(scanMs).toFixed(1)),
      count_distinct_result: scanned,
      speed_up_http_vs_scan: Math.round(median(scanMs) / usageMedian),
      goal: 'usage read < 5 ms median, >= 100x faster than COUNT(DISTINCT) over activity rows',
    };
  } finally {
    await db.end();
    await service.stop();
  }
}
