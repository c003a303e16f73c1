import { MigrationInterface, QueryRunner } from 'typeorm';

export class IndexMemoryTerms1795890583696 implements MigrationInterface {
  name = 'IndexMemoryTerms1795890583696';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "memory_terms" ("end_user_id" uuid NOT NULL, "lexeme" text COLLATE "C" NOT NULL, "memory_id" bigint NOT NULL, CONSTRAINT "memory_terms_pkey" PRIMARY KEY ("end_user_id", "lexeme", "memory_id"))`,
    );
    // The memories written so far, before the indexes that would slow the copy down.
    await queryRunner.query(
      `INSERT INTO "memory_terms" ("end_user_id", "lexeme", "memory_id")
       SELECT m."end_user_id", l.lexeme, m."id"
         FROM "memories" m CROSS JOIN LATERAL unnest(tsvector_to_array(m."search")) AS l(lexeme)`,
    );
    await queryRunner.query(
      `CREATE INDEX "memory_terms_memory_idx" ON "memory_terms" ("memory_id") `,
    );
    await queryRunner.query(
      `ALTER TABLE "memory_terms" ADD CONSTRAINT "memory_terms_memory_id_fkey" FOREIGN KEY ("memory_id") REFERENCES "memories"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    // Every way a memory is written (a reply, an import) goes through this trigger: one
    // statement-level pass over the new rows, so an import of thousands costs one INSERT here.
    await queryRunner.query(
      `CREATE FUNCTION "memories_index_terms"() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         INSERT INTO memory_terms (end_user_id, lexeme, memory_id)
         SELECT n.end_user_id, l.lexeme, n.id
           FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme);
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
