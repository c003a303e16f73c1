import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { createFreshDatabase, type FreshDatabase } from './support/fresh-database';

const run = promisify(execFile);
const ROOT = join(__dirname, '..');
const MIGRATIONS = readdirSync(join(ROOT, 'src', 'database', 'migrations')).filter((name) =>
  name.endsWith('.ts'),
);

/**
 * The README's migration commands as a developer types them: `npm run migration:run` (the TypeORM
 * CLI, one transaction per migration, so that AddEmbeddingSketches can run outside one) and
 * `npm run migration:revert`.
 */
describe('npm run migration:run and migration:revert', () => {
  let database: FreshDatabase;
  let db: Client;

  beforeAll(async () => {
    database = await createFreshDatabase('migration_cli', process.env.DATABASE_URL);
    db = new Client({ connectionString: database.url });
    await db.connect();
  }, 180_000);
  afterAll(async () => {
    await db?.end();
    await database?.drop();
  });

  const npm = (script: string) =>
    run('npm', ['run', '-s', script], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: database.url },
      timeout: 120_000,
    });
  const applied = async () =>
    (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM typeorm_migrations')).rows[0].n;
  const sketchColumns = async () =>
    (
      await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM information_schema.columns
          WHERE column_name = 'sketch'
            AND table_name IN ('memory_embeddings', 'knowledge_chunk_embeddings')`,
      )
    ).rows[0].n;

  it('applies every migration, the one outside a transaction included', async () => {
    await npm('migration:run');
    expect(await applied()).toBe(MIGRATIONS.length);
    expect(await sketchColumns()).toBe(2);
    const { rows } = await db.query<{ name: string; valid: boolean }>(
      `SELECT c.relname AS name, i.indisvalid AS valid FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid
        WHERE c.relname IN ('memory_embeddings_sketches_idx', 'knowledge_chunk_embeddings_sketches_idx',
                            'memory_embeddings_end_user_idx', 'knowledge_chunk_embeddings_organization_idx',
                            'audit_events_end_user_target_idx')
        ORDER BY 1`,
    );
    expect(rows).toEqual([
      { name: 'audit_events_end_user_target_idx', valid: true },
      { name: 'knowledge_chunk_embeddings_sketches_idx', valid: true },
      { name: 'memory_embeddings_sketches_idx', valid: true },
    ]);
  }, 180_000);

  it('reverts the newest migration, and runs it again', async () => {
    const newest = [...MIGRATIONS]
      .sort()
      .at(-1)!
      .replace(/^(\d+)-(\w+)\.ts$/, '$2$1');
    await npm('migration:revert');
    expect(await applied()).toBe(MIGRATIONS.length - 1);
    const { rows } = await db.query<{ name: string }>(
      'SELECT name FROM typeorm_migrations WHERE name = $1',
      [newest],
    );
    expect(rows).toEqual([]);
    await npm('migration:run');
    expect(await applied()).toBe(MIGRATIONS.length);
    expect(await sketchColumns()).toBe(2);
  }, 180_000);
});
