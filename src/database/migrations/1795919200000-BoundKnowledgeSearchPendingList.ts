import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every knowledge search reads all of knowledge_chunks_search_idx's pending list (GIN's fast
 * update), of every organization's recent uploads: at the default 4 MB limit, and with nothing
 * but autovacuum to empty it, that was about 300 pages per search at 30,000 chunks. At 256 kB an
 * upload empties it more often and each search reads at most 32 pages of it (docs/knowledge.md).
 */
export class BoundKnowledgeSearchPendingList1795919200000 implements MigrationInterface {
  name = 'BoundKnowledgeSearchPendingList1795919200000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER INDEX "public"."knowledge_chunks_search_idx" SET (gin_pending_list_limit = 256)`,
    );
    await queryRunner.query(`SELECT gin_clean_pending_list('public.knowledge_chunks_search_idx')`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER INDEX "public"."knowledge_chunks_search_idx" RESET (gin_pending_list_limit)`,
    );
  }
}
