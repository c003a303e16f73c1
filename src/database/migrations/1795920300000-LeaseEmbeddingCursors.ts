import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The EmbeddingWorker calls the embeddings provider with no transaction open (docs/memory.md,
 * "Recall by meaning"): a batch is claimed by a lease recorded on its source's cursor row, until
 * `leased_until`, by the instance holding `lease_token`, instead of by a row lock held through
 * the call. Both null: no lease. Nullable columns without a default: no rewrite, and the brief
 * lock of ADD COLUMN only.
 */
export class LeaseEmbeddingCursors1795920300000 implements MigrationInterface {
  name = 'LeaseEmbeddingCursors1795920300000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "embedding_cursors" ADD "leased_until" TIMESTAMP WITH TIME ZONE`,
    );
    await queryRunner.query(`ALTER TABLE "embedding_cursors" ADD "lease_token" uuid`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "embedding_cursors" DROP COLUMN "lease_token"`);
    await queryRunner.query(`ALTER TABLE "embedding_cursors" DROP COLUMN "leased_until"`);
  }
}
