import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Postings leave with their memory by triggers on memories instead of a foreign key of
 * memory_terms. The key cost every reply a check of the memory for each posting written (about 20)
 * and an entry in memory_terms_memory_idx, which only its cascade read: half of the 0.65 ms the
 * trigger's insert of postings took (pg_stat_statements, bench hot-paths' replies, 0.34 ms
 * without). A memory's postings are its `search` lexemes (memories_index_terms writes them, and
 * nothing updates `search`), so the row trigger finds each by the primary key, the address trims
 * and reads use: one query a deleted memory, as the cascade ran, with nothing kept of the deleted
 * rows but their addresses (a statement trigger's transition table would copy every row a
 * personality's deletion takes). TRUNCATE of memories empties memory_terms too.
 *
 * up() takes both tables' locks first, in the order erasure takes them (memory_terms, then
 * memories), waiting at most 10 s: it fails rather than hold replies behind it, and runs again at
 * the next start. down() is not online (the index is built under a SHARE lock).
 */
export class PostingsGoWithTheirMemory1795921300000 implements MigrationInterface {
  name = 'PostingsGoWithTheirMemory1795921300000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`SET LOCAL lock_timeout = '10s'`);
    await queryRunner.query(`LOCK TABLE "memory_terms", "memories" IN ACCESS EXCLUSIVE MODE`);
    // Each lexeme is a probe of the primary key by its whole value, which no plan can widen:
    // `lexeme = ANY (lexemes)` was read, on a table without statistics, as a filter over every
    // posting of the end user for each memory deleted.
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION "memories_forget_terms"() RETURNS trigger LANGUAGE plpgsql
         SET enable_seqscan = off SET enable_bitmapscan = off AS $$
       BEGIN
         DELETE FROM memory_terms WHERE ctid = ANY (ARRAY(
           SELECT (SELECT t.ctid FROM memory_terms t
                    WHERE t.end_user_id = OLD.end_user_id AND t.lexeme = l.lexeme
                      AND t.memory_id = OLD.id)
             FROM unnest(tsvector_to_array(OLD.search)) AS l(lexeme)));
         RETURN NULL;
       END $$`,
    );
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION "memories_forget_all_terms"() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         TRUNCATE memory_terms;
         RETURN NULL;
       END $$`,
    );
    await queryRunner.query(`DROP TRIGGER IF EXISTS "memories_forget_terms" ON "memories"`);
    await queryRunner.query(
      `CREATE TRIGGER "memories_forget_terms" AFTER DELETE ON "memories"
         FOR EACH ROW EXECUTE FUNCTION "memories_forget_terms"()`,
    );
    await queryRunner.query(`DROP TRIGGER IF EXISTS "memories_forget_all_terms" ON "memories"`);
    await queryRunner.query(
      `CREATE TRIGGER "memories_forget_all_terms" AFTER TRUNCATE ON "memories"
         FOR EACH STATEMENT EXECUTE FUNCTION "memories_forget_all_terms"()`,
    );
    await queryRunner.query(
      `ALTER TABLE "memory_terms" DROP CONSTRAINT IF EXISTS "memory_terms_memory_id_fkey"`,
    );
    await queryRunner.query(`DROP INDEX IF EXISTS "memory_terms_memory_idx"`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX IF NOT EXISTS "memory_terms_memory_idx" ON "memory_terms" ("memory_id")`,
    );
    // None should exist; any would fail the key's validation.
    await queryRunner.query(
      `DELETE FROM "memory_terms" t WHERE NOT EXISTS (SELECT FROM "memories" m WHERE m.id = t.memory_id)`,
    );
    await queryRunner.query(
      `ALTER TABLE "memory_terms" ADD CONSTRAINT "memory_terms_memory_id_fkey"
         FOREIGN KEY ("memory_id") REFERENCES "memories"("id") ON DELETE CASCADE NOT VALID`,
    );
    await queryRunner.query(
      `ALTER TABLE "memory_terms" VALIDATE CONSTRAINT "memory_terms_memory_id_fkey"`,
    );
    await queryRunner.query(`DROP TRIGGER IF EXISTS "memories_forget_all_terms" ON "memories"`);
    await queryRunner.query(`DROP TRIGGER IF EXISTS "memories_forget_terms" ON "memories"`);
    await queryRunner.query(`DROP FUNCTION IF EXISTS "memories_forget_all_terms"()`);
    await queryRunner.query(`DROP FUNCTION IF EXISTS "memories_forget_terms"()`);
  }
}
