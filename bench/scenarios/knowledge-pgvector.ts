import { spawnSync } from 'node:child_process';
import { Client } from 'pg';
import type { Meaning } from '../../src/embeddings/fusion';
import { rankedChunks } from '../../src/knowledge/knowledge.repository';
import { startPgvectorDatabase } from '../../test/support/pgvector-database';
import { CASES, embedAll, seed, type Timed, time, unitVector } from './knowledge-retrieval';
import { loadAverages, round2 } from './support/stats';

/**
 * What pgvector changes in knowledge retrieval by meaning (migration AddPgvectorColumns,
 * docs/memory.md "pgvector"): no machine here has the extension, so this runs on PGlite
 * (PostgreSQL 18 with pgvector 0.8, compiled to WebAssembly, in a child process), where only the
 * ratio means anything, never the milliseconds. Every migration runs there; one organization of
 * knowledge-retrieval's 10,000 chunks, every chunk embedded (256 dimensions) and VACUUM ANALYZE;
 * then a search's fused statement (rankedChunks, limit 4, EMBEDDINGS_CANDIDATES 5,000: the
 * sketches compared, 48 of them whole) with the whole vectors compared by pgvector's `<#>`
 * and by the dot product over real[], side by side, for each message of knowledge-retrieval.
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const database = await startPgvectorDatabase();
  try {
    const migrateStartedAt = performance.now();
    const migrated = spawnSync('npm', ['run', '--silent', 'migration:run'], {
      env: { ...process.env, DATABASE_URL: database.url },
      encoding: 'utf8',
    });
    if (migrated.status !== 0) throw new Error(`migrations failed: ${migrated.stderr}`);
    const migrateSeconds = round2((performance.now() - migrateStartedAt) / 1000);
    const db = new Client({ connectionString: database.url });
    await db.connect();
    try {
      const seedStartedAt = performance.now();
      const [organizationId] = await seed(db, 1);
      await embedAll(db);
      await db.query('VACUUM ANALYZE');
      const seedSeconds = round2((performance.now() - seedStartedAt) / 1000);
      const meaning = (wholeVectors: Meaning['wholeVectors']): Meaning => ({
        model: 'bench',
        vector: unitVector(1),
        candidates: 5_000,
        minSimilarity: 0,
        wholeVectors,
      });
      const figures: Record<string, { pgvector: Timed; array: Timed; ratio: number }> = {};
      for (const [name, text] of Object.entries(CASES)) {
        const pgvector = await time(
          db,
          `pgvector_${name}`,
          rankedChunks(organizationId, null, text, 4, meaning('pgvector')),
        );
        const array = await time(
          db,
          `array_${name}`,
          rankedChunks(organizationId, null, text, 4, meaning('array')),
        );
        figures[name] = { pgvector, array, ratio: round2(pgvector.p50_ms / array.p50_ms) };
      }
      return {
        load_average_at_start: loadAtStart,
        load_average_at_end: loadAverages(),
        method:
          'PGlite 0.5.14 (PostgreSQL 18.6, pgvector 0.8.7, WebAssembly) over pglite-socket in a child process; every migration; 1 organization of 10,000 chunks, embedded, VACUUM ANALYZE; a search by words and meaning (rankedChunks, limit 4), prepared, 10 warm-up runs then BENCH_KNOWLEDGE_RUNS (200) each, whole vectors by pgvector then by real[], round trip from one client',
        note: 'WebAssembly: compare the two columns, not these milliseconds with a native server',
        migrate_seconds: migrateSeconds,
        seed_seconds: seedSeconds,
        cases: CASES,
        search_by_words_and_meaning: figures,
      };
    } finally {
      await db.end();
    }
  } finally {
    await database.stop();
  }
}
