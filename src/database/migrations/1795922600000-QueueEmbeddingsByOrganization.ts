import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The EmbeddingWorker's queue (docs/memory.md, "Recall by meaning"): the rows its cursor has
 * passed and that wait for their embedding, drawn from organization by organization. A new
 * table: nothing else is locked or rewritten. The rows the cursor had already passed are
 * embedded (or passed over), so the queue starts empty. The cursor's lease columns stay for the
 * previous release during a rolling deploy (it embeds above the cursor and moves it, which this
 * release's enqueueing only ever moves forward too); a later release drops them.
 */
export class QueueEmbeddingsByOrganization1795922600000 implements MigrationInterface {
  name = 'QueueEmbeddingsByOrganization1795922600000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "embedding_queue" ("source" text NOT NULL, "model" text NOT NULL, "organization_id" uuid NOT NULL, "row_id" bigint NOT NULL, "claimed_until" TIMESTAMP WITH TIME ZONE, "claim_token" uuid, CONSTRAINT "embedding_queue_pkey" PRIMARY KEY ("source", "model", "organization_id", "row_id"))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "embedding_queue"`);
  }
}
