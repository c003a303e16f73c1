import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Postings leave with their memory by a trigger on memories instead of a foreign key of
 * memory_terms. The key cost every reply a check of the memory for each posting written (about 20)
 * and an entry in memory_terms_memory_idx, which only its cascade read: half of the 0.65 ms the
 * trigger's insert of postings took (pg_stat_statements, bench hot-paths' replies, 0.34 ms
 * without). A memory's postings are its `search` lexemes (memories_index_terms writes them, and
 * nothing updates `search`), so the trigger finds each by the primary key, the address trims and
 * reads use.
 */
export class PostingsGoWithTheirMemory1795921300000 implements MigrationInterface {
  name = 'PostingsGoWithTheirMemory1795921300000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    // Planned in the trigger without statistics of the transition table: one probe of the primary
    // key a posting, however many memories a statement deletes.
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION "memories_forget_terms"() RETURNS trigger LANGUAGE plpgsql
         SET enable_seqscan = off SET enable_bitmapscan = off
         SET enable_hashjoin = off SET enable_mergejoin = off AS $$
       BEGIN
         DELETE FROM memory_terms t
          USING (SELECT o.end_user_id, l.lexeme, o.id
                   FROM old_memories o
                  CROSS JOIN LATERAL unnest(tsvector_to_array(o.search)) AS l(lexeme)) d
          WHERE t.end_user_id = d.end_user_id AND t.lexeme = d.lexeme AND t.memory_id = d.id;
         RETURN NULL;
       END $$`,
    );
    await queryRunner.query(`DROP TRIGGER IF EXISTS "memories_forget_terms" ON "memories"`);
    await queryRunner.query(
      `CREATE TRIGGER "memories_forget_terms" AFTER DELETE ON "memories"
         REFERENCING OLD TABLE AS old_memories
         FOR EACH STATEMENT EXECUTE FUNCTION "memories_forget_terms"()`,
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
    await queryRunner.query(
      `ALTER TABLE "memory_terms" ADD CONSTRAINT "memory_terms_memory_id_fkey"
         FOREIGN KEY ("memory_id") REFERENCES "memories"("id") ON DELETE CASCADE`,
    );
    await queryRunner.query(`DROP TRIGGER IF EXISTS "memories_forget_terms" ON "memories"`);
    await queryRunner.query(`DROP FUNCTION IF EXISTS "memories_forget_terms"()`);
  }
}
