import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline } from '../online-index';

/** Each embeddings table, its id, the bound's index before and after, and what the new one carries. */
const TABLES = [
  {
    table: 'memory_embeddings',
    id: 'memory_id',
    before: 'memory_embeddings_end_user_idx',
    index: 'memory_embeddings_sketches_idx',
    key: '"end_user_id", "memory_id"',
    carried: '"personality_id", "model", "sketch"',
  },
  {
    table: 'knowledge_chunk_embeddings',
    id: 'chunk_id',
    before: 'knowledge_chunk_embeddings_organization_idx',
    index: 'knowledge_chunk_embeddings_sketches_idx',
    key: '"organization_id", "chunk_id"',
    carried: '"model", "sketch"',
  },
];

/** Rows given their sketch per statement of the backfill. */
const BACKFILL_BATCH = 5_000;

/**
 * Sign sketches of the embeddings (docs/memory.md, "The bound"): one bit per dimension, set where
 * the component is positive. The ranking by meaning orders an end user's (an organization's)
 * latest EMBEDDINGS_CANDIDATES by the Hamming distance of their sketches to the question's, read
 * from the covering indexes below without touching the rows, and compares whole vectors only for
 * the nearest few. `embedding_sketch` is the one definition: a trigger sets each row's from its
 * embedding, so every writer (an instance still running the previous release included) writes
 * it, and the question's side uses it too.
 *
 * Online, outside a transaction: the column is added without a default (no rewrite), the rows
 * are given their sketch in short batches, NOT NULL is proved by a validated check (which blocks
 * no reader or writer) and the indexes are built concurrently, the old ones dropped only then, so
 * that searches, the worker and erasure go on meanwhile. Each step can run again, should the
 * migration stop half way. down() is not online: it runs in one transaction.
 */
export class AddEmbeddingSketches1795920200000 implements MigrationInterface {
  name = 'AddEmbeddingSketches1795920200000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    // A lock queued behind a long query would stall every query queued behind it: the brief
    // locks of ALTER TABLE and CREATE TRIGGER are given up instead (the migration fails and is
    // run again on the next start or Job).
    await queryRunner.query(`SET lock_timeout = '10s'`);
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION embedding_sketch(embedding real[]) RETURNS bit varying
         LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
         AS $$ SELECT coalesce(string_agg(CASE WHEN v > 0 THEN '1' ELSE '0' END, '' ORDER BY i), '')::bit varying
                 FROM unnest(embedding) WITH ORDINALITY AS u(v, i) $$`,
    );
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION embeddings_set_sketch() RETURNS trigger LANGUAGE plpgsql
         AS $$ BEGIN NEW.sketch := embedding_sketch(NEW.embedding); RETURN NEW; END $$`,
    );
    for (const { table, id } of TABLES) {
      await queryRunner.query(
        `ALTER TABLE "${table}" ADD COLUMN IF NOT EXISTS "sketch" bit varying`,
      );
      // Replaced in place, never dropped first: a row written in between would have no sketch.
      await queryRunner.query(
        `CREATE OR REPLACE TRIGGER "${table}_set_sketch"
           BEFORE INSERT OR UPDATE OF "embedding", "sketch" ON "${table}"
           FOR EACH ROW EXECUTE FUNCTION embeddings_set_sketch()`,
      );
      // By id ranges, each its own statement: no row is held for long, none is read twice.
      let after = '0';
      for (;;) {
        const [{ upto }] = (await queryRunner.query(
          `SELECT max("${id}")::text AS upto FROM (SELECT "${id}" FROM "${table}"
             WHERE "${id}" > $1 ORDER BY "${id}" LIMIT ${BACKFILL_BATCH}) batch`,
          [after],
        )) as Array<{ upto: string | null }>;
        if (upto === null) break;
        // The trigger computes the sketch.
        await queryRunner.query(
          `UPDATE "${table}" SET "embedding" = "embedding"
            WHERE "${id}" > $1 AND "${id}" <= $2 AND "sketch" IS NULL`,
          [after, upto],
        );
        after = upto;
      }
      await queryRunner.query(
        `ALTER TABLE "${table}" DROP CONSTRAINT IF EXISTS "${table}_sketch_not_null"`,
      );
      await queryRunner.query(
        `ALTER TABLE "${table}" ADD CONSTRAINT "${table}_sketch_not_null" CHECK ("sketch" IS NOT NULL) NOT VALID`,
      );
      await queryRunner.query(
        `ALTER TABLE "${table}" VALIDATE CONSTRAINT "${table}_sketch_not_null"`,
      );
      // With the check validated, SET NOT NULL does not scan the table.
      await queryRunner.query(`ALTER TABLE "${table}" ALTER COLUMN "sketch" SET NOT NULL`);
      await queryRunner.query(`ALTER TABLE "${table}" DROP CONSTRAINT "${table}_sketch_not_null"`);
    }
    // The old indexes go only once both new ones are valid.
    for (const { table, index, key, carried } of TABLES) {
      await createIndexOnline(queryRunner, index, `ON "${table}" (${key}) INCLUDE (${carried})`);
    }
    // A concurrent drop waits for every older transaction too, blocking no one meanwhile.
    await queryRunner.query(`SET lock_timeout = 0`);
    for (const { before } of TABLES) {
      await queryRunner.query(`DROP INDEX CONCURRENTLY IF EXISTS "public"."${before}"`);
    }
    await queryRunner.query(`RESET lock_timeout`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    for (const { table, before, index, key } of TABLES) {
      await queryRunner.query(`CREATE INDEX IF NOT EXISTS "${before}" ON "${table}" (${key})`);
      await queryRunner.query(`DROP INDEX IF EXISTS "public"."${index}"`);
      await queryRunner.query(`DROP TRIGGER IF EXISTS "${table}_set_sketch" ON "${table}"`);
      await queryRunner.query(`ALTER TABLE "${table}" DROP COLUMN IF EXISTS "sketch"`);
    }
    await queryRunner.query(`DROP FUNCTION IF EXISTS embeddings_set_sketch()`);
    await queryRunner.query(`DROP FUNCTION IF EXISTS embedding_sketch(real[])`);
  }
}
