import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline } from '../online-index';

/** The unique index that becomes the primary key (renamed to it by ADD PRIMARY KEY USING INDEX). */
const PARTS_KEY = 'memory_embeddings_parts_key';
const SKETCHES_BEFORE = 'memory_embeddings_sketches_idx';
const SKETCHES = 'memory_embeddings_part_sketches_idx';

/**
 * A memory of several sentences is embedded whole and sentence by sentence (docs/memory.md,
 * "Recall by meaning"): memory_embeddings holds a row per part, `part` 0 the whole. The rows
 * there are all wholes, part 0. The bound's covering index carries the part, so that the
 * shortlist by sketch still reads the index alone.
 *
 * Online, outside a transaction, as AddEmbeddingSketches: the column is added with a constant
 * default (no rewrite), the new key and index are built concurrently, and the primary key is
 * swapped for the new key in one brief ALTER. Each step can run again. down() is not online:
 * it keeps each memory's whole embedding only.
 */
export class EmbedMemorySentences1795922000000 implements MigrationInterface {
  name = 'EmbedMemorySentences1795922000000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`SET lock_timeout = '10s'`);
    await queryRunner.query(
      `ALTER TABLE "memory_embeddings" ADD COLUMN IF NOT EXISTS "part" smallint NOT NULL DEFAULT 0`,
    );
    const [{ swapped }] = (await queryRunner.query(
      `SELECT count(*) = 2 AS swapped FROM pg_constraint c, unnest(c.conkey) k
        WHERE c.conrelid = 'memory_embeddings'::regclass AND c.conname = 'memory_embeddings_pkey'`,
    )) as Array<{ swapped: boolean }>;
    if (!swapped) {
      await createIndexOnline(
        queryRunner,
        PARTS_KEY,
        `ON "memory_embeddings" ("memory_id", "part")`,
        {
          unique: true,
        },
      );
      await queryRunner.query(`SET lock_timeout = '10s'`);
      await queryRunner.query(
        `ALTER TABLE "memory_embeddings" DROP CONSTRAINT "memory_embeddings_pkey",
           ADD CONSTRAINT "memory_embeddings_pkey" PRIMARY KEY USING INDEX "${PARTS_KEY}"`,
      );
    }
    await createIndexOnline(
      queryRunner,
      SKETCHES,
      `ON "memory_embeddings" ("end_user_id", "memory_id")
         INCLUDE ("part", "personality_id", "model", "sketch")`,
    );
    // A concurrent drop waits for every older transaction, blocking no one meanwhile.
    await queryRunner.query(`SET lock_timeout = 0`);
    await queryRunner.query(`DROP INDEX CONCURRENTLY IF EXISTS "public"."${SKETCHES_BEFORE}"`);
    await queryRunner.query(`RESET lock_timeout`);
  }

  /** Not online: migration:revert runs it in a transaction. */
  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DELETE FROM "memory_embeddings" WHERE "part" <> 0`);
    await queryRunner.query(
      `CREATE INDEX IF NOT EXISTS "${SKETCHES_BEFORE}" ON "memory_embeddings" ("end_user_id", "memory_id")
         INCLUDE ("personality_id", "model", "sketch")`,
    );
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."${SKETCHES}"`);
    await queryRunner.query(
      `ALTER TABLE "memory_embeddings" DROP CONSTRAINT "memory_embeddings_pkey",
         ADD CONSTRAINT "memory_embeddings_pkey" PRIMARY KEY ("memory_id")`,
    );
    await queryRunner.query(`ALTER TABLE "memory_embeddings" DROP COLUMN "part"`);
  }
}
