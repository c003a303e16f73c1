import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Retrieval reads memory_terms since IndexMemoryTerms; no statement uses the GIN index over
 * (end_user_id, personality_id, search) any more, and every reply paid for it in writes and WAL.
 */
export class DropUnusedMemorySearchIndex1795916120617 implements MigrationInterface {
  name = 'DropUnusedMemorySearchIndex1795916120617';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."memories_search_idx"`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX "memories_search_idx" ON "memories" USING gin ("end_user_id", "personality_id", "search")`,
    );
  }
}
