import { setTimeout as sleep } from 'node:timers/promises';
import { MigrationInterface, QueryRunner } from 'typeorm';

/** Postings kept per (end user, lexeme), as in IndexMemoryTerms (a migration keeps its literal). */
const POSTINGS = 64;

/** Memories whose postings are given their columns per statement of the backfill. */
const BACKFILL_BATCH = 1_000;

/** The covering key built beside the primary key, then made the primary key. */
const COVERING = 'memory_terms_covering';

/** The new memories' lexemes, one row per (end user, lexeme). */
const TOUCHED = `SELECT DISTINCT n.end_user_id, l.lexeme
                   FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)`;

/** LockOnlyTrimmedMemoryTerms' trim, unchanged. */
const TRIM = `DELETE FROM memory_terms WHERE ctid = ANY (ARRAY(
           SELECT held.ctid FROM memory_terms held
            WHERE held.ctid = ANY (ARRAY(
                    SELECT past.ctid FROM (${TOUCHED}) k
                     CROSS JOIN LATERAL (
                           SELECT t.ctid FROM memory_terms t
                            WHERE t.end_user_id = k.end_user_id AND t.lexeme = k.lexeme
                            ORDER BY t.memory_id DESC OFFSET ${POSTINGS}) past))
              FOR UPDATE SKIP LOCKED));`;

/** The trigger function with the given insert; MemoryTermsByAddress's setting kept. */
const indexTerms = (insert: string) =>
  `CREATE OR REPLACE FUNCTION "memories_index_terms"() RETURNS trigger LANGUAGE plpgsql
     SET enable_seqscan = off AS $$
   BEGIN
     ${insert}
     ${TRIM}
     RETURN NULL;
   END $$`;

/** The insert of the trigger function: with the carried columns (up) or without (down). */
const insertPostings = (carrying: boolean) => {
  const carried = carrying ? ', personality_id, memory_length' : '';
  return `INSERT INTO memory_terms (end_user_id, lexeme, memory_id${carried})
         SELECT end_user_id, lexeme, id${carried} FROM (
           SELECT n.end_user_id, l.lexeme, n.id, n.personality_id, length(n.search) AS memory_length,
                  row_number() OVER (PARTITION BY n.end_user_id, l.lexeme ORDER BY n.id DESC) AS newest
             FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)) p
          WHERE newest <= ${POSTINGS};`;
};

/**
 * A posting carries its memory's personality and length (in lexemes), in the primary key's index
 * as included columns: ranking read both from the memory, one primary-key lookup in `memories`
 * per candidate, and that was most of a recall's database time (about 900 lookups, 2,500 buffers,
 * for the heavy end user of bench memory-scale). Now a candidate is read from the posting alone,
 * an index-only scan where the table is vacuumed.
 *
 * Online, outside a transaction, as AddEmbeddingSketches: the trigger writes the columns from now
 * on (every writer, an instance of the previous release included); the migration waits, locking
 * nothing, for the transactions that may have inserted under the previous trigger; the postings
 * written before get theirs in short batches by memory; NOT NULL is proved by a validated check;
 * the covering index is built concurrently and then becomes the primary key (a brief exclusive
 * lock). Each step can run again, should the migration stop half way, and skips what is done.
 * The batches rewrite every posting: until autovacuum passes, recall reads the postings' rows
 * rather than the index alone. down() is not online.
 */
export class PostingsCarryPersonalityAndLength1795920800000 implements MigrationInterface {
  name = 'PostingsCarryPersonalityAndLength1795920800000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    const query = async <Row>(text: string, values?: unknown[]) =>
      (await queryRunner.query(text, values)) as Row[];
    await queryRunner.query(`SET lock_timeout = '10s'`);
    // Checked first: ADD COLUMN IF NOT EXISTS locks the table even when there is nothing to add.
    const [{ added }] = await query<{ added: boolean }>(
      `SELECT count(*) = 2 AS added FROM pg_attribute
        WHERE attrelid = 'public.memory_terms'::regclass AND NOT attisdropped
          AND attname IN ('personality_id', 'memory_length')`,
    );
    if (!added) {
      await queryRunner.query(
        `ALTER TABLE "memory_terms" ADD COLUMN IF NOT EXISTS "personality_id" uuid,
                                    ADD COLUMN IF NOT EXISTS "memory_length" integer`,
      );
    }
    await queryRunner.query(indexTerms(insertPostings(true)));
    // A transaction that ran the previous trigger and has not ended would write postings the
    // backfill cannot see: wait until every transaction older than this point has ended (a
    // snapshot's xmin passes it), locking nothing.
    const [{ marker }] = await query<{ marker: string }>(
      `SELECT pg_current_xact_id()::text AS marker`,
    );
    for (;;) {
      const [{ ended }] = await query<{ ended: boolean }>(
        `SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::xid8 AS ended`,
        [marker],
      );
      if (ended) break;
      await sleep(100);
    }
    // By ranges of memory ids, each its own statement: no posting is held for long.
    let after = '0';
    for (;;) {
      const [{ upto }] = await query<{ upto: string | null }>(
        `SELECT max(id)::text AS upto FROM (SELECT id FROM "memories"
           WHERE id > $1 ORDER BY id LIMIT ${BACKFILL_BATCH}) batch`,
        [after],
      );
      if (upto === null) break;
      await queryRunner.query(
        `UPDATE "memory_terms" t SET "personality_id" = m.personality_id,
                "memory_length" = length(m.search)
           FROM "memories" m
          WHERE m.id > $1 AND m.id <= $2 AND t.memory_id = m.id AND t.personality_id IS NULL`,
        [after, upto],
      );
      after = upto;
    }
    const [{ required }] = await query<{ required: boolean }>(
      `SELECT bool_and(attnotnull) AS required FROM pg_attribute
        WHERE attrelid = 'public.memory_terms'::regclass
          AND attname IN ('personality_id', 'memory_length')`,
    );
    if (!required) {
      await queryRunner.query(
        `ALTER TABLE "memory_terms" DROP CONSTRAINT IF EXISTS "memory_terms_carried"`,
      );
      await queryRunner.query(
        `ALTER TABLE "memory_terms" ADD CONSTRAINT "memory_terms_carried"
           CHECK ("personality_id" IS NOT NULL AND "memory_length" IS NOT NULL) NOT VALID`,
      );
      await queryRunner.query(
        `ALTER TABLE "memory_terms" VALIDATE CONSTRAINT "memory_terms_carried"`,
      );
      // With the check validated, SET NOT NULL does not scan the table.
      await queryRunner.query(
        `ALTER TABLE "memory_terms" ALTER COLUMN "personality_id" SET NOT NULL,
                                    ALTER COLUMN "memory_length" SET NOT NULL`,
      );
      await queryRunner.query(`ALTER TABLE "memory_terms" DROP CONSTRAINT "memory_terms_carried"`);
    }

    const covering = async (index: string) =>
      (
        await query<{ covering: boolean }>(
          `SELECT coalesce(bool_and(i.indisvalid AND i.indnatts > i.indnkeyatts), false) AS covering
             FROM pg_index i WHERE i.indexrelid = to_regclass($1)`,
          [`public.${index}`],
        )
      )[0].covering;
    if (!(await covering('memory_terms_pkey'))) {
      // Built by a run that stopped before the swap: taken as it is.
      if (!(await covering(COVERING))) {
        // A concurrent build waits for every older transaction and blocks no one: no lock timeout.
        await queryRunner.query(`SET lock_timeout = 0`);
        await queryRunner.query(`DROP INDEX CONCURRENTLY IF EXISTS "public"."${COVERING}"`);
        await queryRunner.query(
          `CREATE UNIQUE INDEX CONCURRENTLY "${COVERING}" ON "memory_terms"
             ("end_user_id", "lexeme", "memory_id") INCLUDE ("personality_id", "memory_length")`,
        );
        await queryRunner.query(`SET lock_timeout = '10s'`);
      }
      // The index takes the constraint's name.
      await queryRunner.query(
        `ALTER TABLE "memory_terms" DROP CONSTRAINT "memory_terms_pkey",
           ADD CONSTRAINT "memory_terms_pkey" PRIMARY KEY USING INDEX "${COVERING}"`,
      );
    }
    await queryRunner.query(`RESET lock_timeout`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    // First: the previous trigger writes neither column.
    await queryRunner.query(
      `ALTER TABLE "memory_terms" ALTER COLUMN "personality_id" DROP NOT NULL,
                                  ALTER COLUMN "memory_length" DROP NOT NULL`,
    );
    await queryRunner.query(indexTerms(insertPostings(false)));
    await queryRunner.query(
      `CREATE UNIQUE INDEX "${COVERING}" ON "memory_terms" ("end_user_id", "lexeme", "memory_id")`,
    );
    await queryRunner.query(
      `ALTER TABLE "memory_terms" DROP CONSTRAINT "memory_terms_pkey",
         ADD CONSTRAINT "memory_terms_pkey" PRIMARY KEY USING INDEX "${COVERING}"`,
    );
    await queryRunner.query(
      `ALTER TABLE "memory_terms" DROP COLUMN "personality_id", DROP COLUMN "memory_length"`,
    );
  }
}
