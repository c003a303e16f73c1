import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Postings kept per (end user, lexeme): the latest memories holding it. A literal here, not
 * memory-search.ts's constant: a migration stays what it was when it landed.
 */
const POSTINGS = 64;

export class IndexMemoryTerms1795890583696 implements MigrationInterface {
  name = 'IndexMemoryTerms1795890583696';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "memory_terms" ("end_user_id" uuid NOT NULL, "lexeme" text COLLATE "C" NOT NULL, "memory_id" bigint NOT NULL, CONSTRAINT "memory_terms_pkey" PRIMARY KEY ("end_user_id", "lexeme", "memory_id"))`,
    );
    // The memories written so far, the latest POSTINGS of each (end user, lexeme), before the
    // indexes that would slow the copy down.
    await queryRunner.query(
      `INSERT INTO "memory_terms" ("end_user_id", "lexeme", "memory_id")
       SELECT end_user_id, lexeme, id FROM (
         SELECT m."end_user_id", l.lexeme, m."id",
                row_number() OVER (PARTITION BY m."end_user_id", l.lexeme ORDER BY m."id" DESC) AS newest
           FROM "memories" m CROSS JOIN LATERAL unnest(tsvector_to_array(m."search")) AS l(lexeme)) p
        WHERE newest <= ${POSTINGS}`,
    );
    await queryRunner.query(
      `CREATE INDEX "memory_terms_memory_idx" ON "memory_terms" ("memory_id") `,
    );
    await queryRunner.query(
      `ALTER TABLE "memory_terms" ADD CONSTRAINT "memory_terms_memory_id_fkey" FOREIGN KEY ("memory_id") REFERENCES "memories"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    // Every way a memory is written (a reply, an import) goes through this trigger, once per
    // statement. It lists the new memories' lexemes, then lets go of the postings of each lexeme
    // it touched past the POSTINGS latest: what recall reads of a lexeme is bounded in the
    // table itself, so no plan can make it read more. Rows another transaction holds are skipped,
    // never waited for (two replies of one end user cannot deadlock here); a later write trims
    // them.
    await queryRunner.query(
      `CREATE FUNCTION "memories_index_terms"() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         INSERT INTO memory_terms (end_user_id, lexeme, memory_id)
         SELECT end_user_id, lexeme, id FROM (
           SELECT n.end_user_id, l.lexeme, n.id,
                  row_number() OVER (PARTITION BY n.end_user_id, l.lexeme ORDER BY n.id DESC) AS newest
             FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)) p
          WHERE newest <= ${POSTINGS};
         DELETE FROM memory_terms WHERE ctid IN (
           SELECT past.ctid
             FROM (SELECT DISTINCT n.end_user_id, l.lexeme
                     FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)) k
            CROSS JOIN LATERAL (
                  SELECT t.ctid FROM memory_terms t
                   WHERE t.end_user_id = k.end_user_id AND t.lexeme = k.lexeme
                   ORDER BY t.memory_id DESC OFFSET ${POSTINGS}
                     FOR UPDATE SKIP LOCKED) past);
         RETURN NULL;
       END $$`,
    );
    await queryRunner.query(
      `CREATE TRIGGER "memories_index_terms" AFTER INSERT ON "memories"
       REFERENCING NEW TABLE AS new_memories
       FOR EACH STATEMENT EXECUTE FUNCTION "memories_index_terms"()`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER "memories_index_terms" ON "memories"`);
    await queryRunner.query(`DROP FUNCTION "memories_index_terms"()`);
    await queryRunner.query(
      `ALTER TABLE "memory_terms" DROP CONSTRAINT "memory_terms_memory_id_fkey"`,
    );
    await queryRunner.query(`DROP INDEX "public"."memory_terms_memory_idx"`);
    await queryRunner.query(`DROP TABLE "memory_terms"`);
  }
}
