import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * How often a queued text failed alone at the embeddings provider (EmbeddingWorker: it then waits
 * on its own, and is passed over after a number of tries), so that one text a provider answers
 * with a 5xx no longer holds back every organization's embeddings. A column with a constant
 * default: no rewrite, the table locked only for the catalog change.
 */
export class EmbeddingQueueCountsAttempts1795922900000 implements MigrationInterface {
  name = 'EmbeddingQueueCountsAttempts1795922900000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "embedding_queue" ADD "attempts" smallint NOT NULL DEFAULT '0'`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "embedding_queue" DROP COLUMN "attempts"`);
  }
}
