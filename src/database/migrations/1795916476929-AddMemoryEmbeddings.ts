import { MigrationInterface, QueryRunner } from 'typeorm';

/** Recall by meaning (contract §27): memories' embeddings and the worker's high-water marks. */
export class AddMemoryEmbeddings1795916476929 implements MigrationInterface {
  name = 'AddMemoryEmbeddings1795916476929';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "memory_embeddings" ("memory_id" bigint NOT NULL, "end_user_id" uuid NOT NULL, "personality_id" uuid NOT NULL, "model" text NOT NULL, "embedding" real array NOT NULL, CONSTRAINT "memory_embeddings_pkey" PRIMARY KEY ("memory_id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "memory_embeddings_end_user_idx" ON "memory_embeddings" ("end_user_id", "memory_id") `,
    );
    await queryRunner.query(
      `CREATE TABLE "embedding_cursors" ("source" text NOT NULL, "model" text NOT NULL, "position" bigint NOT NULL DEFAULT '0', "safe_bound" bigint NOT NULL DEFAULT '0', "pending_bound" bigint, "pending_xmax" bigint, CONSTRAINT "embedding_cursors_pkey" PRIMARY KEY ("source", "model"))`,
    );
    await queryRunner.query(
      `ALTER TABLE "memory_embeddings" ADD CONSTRAINT "memory_embeddings_memory_id_fkey" FOREIGN KEY ("memory_id") REFERENCES "memories"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "memory_embeddings" DROP CONSTRAINT "memory_embeddings_memory_id_fkey"`,
    );
    await queryRunner.query(`DROP TABLE "embedding_cursors"`);
    await queryRunner.query(`DROP INDEX "public"."memory_embeddings_end_user_idx"`);
    await queryRunner.query(`DROP TABLE "memory_embeddings"`);
  }
}
