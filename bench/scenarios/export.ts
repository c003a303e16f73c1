import { Client } from 'pg';
import { startService } from '../lib/service';
import { benchTenant, memoryOf } from './support/data-plane';

const MEMORIES = 100_000;

const countMemories = (text: string) => (text.match(/"content" ?: ?"Memory number /g) ?? []).length;

/**
 * GET /v1/end-users/{user_id}/export of one user with 100,000 memories: the server's resident
 * memory is sampled every 10 ms during the download (/proc/<pid>/status). Goal: peak RSS
 * growth < 64 MiB, ≥ 20 MB/s.
 */
export async function run(): Promise<Record<string, unknown>> {
  const service = await startService();
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  try {
    const tenant = await benchTenant(service.baseUrl);
    const userId = 'bench-exported';
    const created = await fetch(`${service.baseUrl}/v1/end-users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: tenant.auth },
      body: JSON.stringify({ user_id: userId, metadata: { plan: 'pro' } }),
    });
    if (created.status !== 201) throw new Error(`create: ${created.status}`);
    await db.query(
      `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content, emotion,
                             intensity, vocabulary_version, created_at)
       SELECT $1, e.id, $2, CASE WHEN g % 2 = 0 THEN 'user' ELSE 'personality' END,
              'Memory number ' || g || ': ' || repeat('a few words about the day, ', 6),
              'joy', 0.5, '2.0.0', now()
         FROM end_users e, generate_series(1, $3) g
        WHERE e.organization_id = $1 AND e.user_id = $4`,
      [tenant.organizationId, tenant.personalityId, MEMORIES, userId],
    );
    await db.query('ANALYZE memories');

    const url = `${service.baseUrl}/v1/end-users/${userId}/export`;
    const headers = { authorization: tenant.auth };
    // One warm-up export (JIT), then settle before the baseline; the idle figure is also kept,
    // so the growth is reported against both.
    const idle = memoryOf(service.pid);
    await (await fetch(url, { headers })).arrayBuffer();
    await new Promise((resolve) => setTimeout(resolve, 1_000));

    const before = memoryOf(service.pid);
    let peakRss = before.rss_mib;
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, memoryOf(service.pid).rss_mib);
    }, 10);
    const start = process.hrtime.bigint();
    const response = await fetch(url, { headers });
    // Read the stream without keeping it: count bytes and the memories' ids as they pass.
    let bytes = 0;
    let tail = '';
    let memoryIds = 0;
    const decoder = new TextDecoder();
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      bytes += chunk.length;
      const text = tail + decoder.decode(chunk, { stream: true });
      // Matches wholly inside the carried-over tail were counted with the previous chunk.
      memoryIds += countMemories(text) - countMemories(tail);
      tail = text.slice(-40);
    }
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    clearInterval(sampler);
    const after = memoryOf(service.pid);
    peakRss = Math.max(peakRss, after.rss_mib);

    if (response.status !== 200) throw new Error(`export: ${response.status}`);
    return {
      memories: MEMORIES,
      memories_seen_in_stream: memoryIds,
      content_disposition: response.headers.get('content-disposition'),
      bytes,
      seconds: Number(seconds.toFixed(2)),
      mb_per_sec: Number((bytes / 1e6 / seconds).toFixed(1)),
      rss_idle_before_warm_up_mib: Number(idle.rss_mib.toFixed(1)),
      rss_before_mib: Number(before.rss_mib.toFixed(1)),
      rss_peak_during_mib: Number(peakRss.toFixed(1)),
      rss_growth_mib: Number((peakRss - before.rss_mib).toFixed(1)),
      vm_hwm_after_mib: Number(after.hwm_mib.toFixed(1)),
      hwm_growth_over_idle_mib: Number((after.hwm_mib - idle.rss_mib).toFixed(1)),
      goal: 'peak RSS growth < 64 MiB, >= 20 MB/s',
    };
  } finally {
    await db.end();
    await service.stop();
  }
}
