import { Client } from 'pg';
import { httpTo } from '../../test/support/built-app';
import { importConversation } from '../../test/support/data-plane';
import { FakeEmbeddings } from '../../test/support/fake-embeddings';
import { buildRevision } from '../lib/build-revision';
import { type RunningService, startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { loadAverages, round2 } from './support/stats';

/**
 * One tenant's import beside another's single reply, in the embedding worker's queue (review of
 * 2026-12-05): tenant A imports IMPORTED memories at once, then tenant B sends one reply. How
 * long B's message waits for its embedding, and how long A's import takes to be embedded, with
 * one instance and with two side by side, for the code before the queue (BENCH_BEFORE) and this
 * tree. The provider is the fake embedder answering after PROVIDER_DELAY_MS a call, as a hosted
 * provider does (about 50 ms for a batch of 64 short texts).
 */

const BEFORE = process.env.BENCH_BEFORE ?? '0196f0e';
const IMPORTED = Number(process.env.BENCH_EMBEDDING_FAIRNESS_IMPORTED ?? 20_000);
const PROVIDER_DELAY_MS = 50;
const POLL_MS = 50;

async function embeddedOf(db: Client, organizationId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id
      WHERE m.organization_id = $1`,
    [organizationId],
  );
  return rows[0].n;
}

/** Seconds since `since` once the organization has `count` memories embedded. */
async function embeddedAfter(
  db: Client,
  organizationId: string,
  count: number,
  since: number,
): Promise<number> {
  while ((await embeddedOf(db, organizationId)) < count) {
    if (performance.now() - since > 600_000) throw new Error('not embedded within 10 min');
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return round2((performance.now() - since) / 1000);
}

async function importBesideReply(services: RunningService[]) {
  const [first] = services;
  const db = new Client({ connectionString: first.databaseUrl });
  await db.connect();
  try {
    const importer = await benchTenant(first.baseUrl);
    const other = await benchTenant(first.baseUrl);
    const texts = Array.from(
      { length: IMPORTED },
      (_, i) => `Imported memory ${i}: we walked by the river and talked about the garden.`,
    );
    const importStartedAt = performance.now();
    await importConversation(
      httpTo(first.baseUrl),
      importer.auth,
      importer.personalityId,
      'importer',
      texts,
    );
    const importSeconds = (performance.now() - importStartedAt) / 1000;
    const replyAt = performance.now();
    const reply = await fetch(`${first.baseUrl}/v1/respond`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: other.auth },
      body: JSON.stringify({
        personality_id: other.personalityId,
        user_id: 'single',
        message: 'My sister Ana moved to Lisbon last spring.',
      }),
    });
    if (reply.status !== 200) throw new Error(`reply answered ${reply.status}`);
    return {
      import_request_seconds: round2(importSeconds),
      // The message and the reply: two memories.
      other_tenant_reply_embedded_after_seconds: await embeddedAfter(
        db,
        other.organizationId,
        2,
        replyAt,
      ),
      import_embedded_after_seconds: await embeddedAfter(
        db,
        importer.organizationId,
        IMPORTED,
        importStartedAt,
      ),
    };
  } finally {
    await db.end();
  }
}

export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const before = buildRevision(BEFORE);
  const provider = new FakeEmbeddings();
  await provider.start();
  provider.delay(PROVIDER_DELAY_MS);
  const env = {
    EMBEDDINGS_MODEL: 'fake-embed',
    EMBEDDINGS_BASE_URL: provider.url,
    EMBEDDINGS_API_KEY: 'sk-bench',
    EMBEDDINGS_POLL_INTERVAL_MS: '200',
  };
  const results: Record<string, Record<string, unknown>> = {};
  try {
    for (const [name, main] of [
      ['before', before.main],
      ['this_tree', undefined],
    ] as const) {
      for (const instances of [1, 2]) {
        const first = await startService({ main, env });
        const services = [first];
        try {
          if (instances === 2) {
            services.push(await startService({ main, env, databaseUrl: first.databaseUrl }));
          }
          results[`${name}_${instances}_instance${instances === 1 ? '' : 's'}`] =
            await importBesideReply(services);
        } finally {
          for (const service of services.reverse()) await service.stop();
        }
      }
    }
  } finally {
    before.cleanup();
    await provider.stop();
  }
  return {
    method: `tenant A imports ${IMPORTED} memories (POST /v1/end-users/import, one request), then tenant B sends one reply (two memories); the time until B's two memories are embedded, and until A's import is, from the import's start; fake embedder answering after ${PROVIDER_DELAY_MS} ms a call, EMBEDDINGS_BATCH_SIZE 64, EMBEDDINGS_POLL_INTERVAL_MS 200; one instance, then two on one database; ${BEFORE} (before the queue) first, then this tree`,
    before_revision: before.revision,
    load_average_at_start: loadAtStart,
    load_average_at_end: loadAverages(),
    ...results,
  };
}
