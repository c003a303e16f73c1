import { MigrationInterface, QueryRunner } from 'typeorm';

/** Knowledge chunks as a second embedding source (contract §27): an id for the worker, embeddings. */
export class AddKnowledgeChunkEmbeddings1795919108420 implements MigrationInterface {
  name = 'AddKnowledgeChunkEmbeddings1795919108420';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "knowledge_chunk_embeddings" ("chunk_id" bigint NOT NULL, "organization_id" uuid NOT NULL, "model" text NOT NULL, "embedding" real array NOT NULL, CONSTRAINT "knowledge_chunk_embeddings_pkey" PRIMARY KEY ("chunk_id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "knowledge_chunk_embeddings_organization_idx" ON "knowledge_chunk_embeddings" ("organization_id", "chunk_id") `,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_chunks" ADD "id" bigint GENERATED ALWAYS AS IDENTITY NOT NULL`,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_chunks" ADD CONSTRAINT "knowledge_chunks_id_key" UNIQUE ("id")`,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_chunk_embeddings" ADD CONSTRAINT "knowledge_chunk_embeddings_chunk_id_fkey" FOREIGN KEY ("chunk_id") REFERENCES "knowledge_chunks"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "knowledge_chunk_embeddings" DROP CONSTRAINT "knowledge_chunk_embeddings_chunk_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_chunks" DROP CONSTRAINT "knowledge_chunks_id_key"`,
    );
    await queryRunner.query(`ALTER TABLE "knowledge_chunks" DROP COLUMN "id"`);
    await queryRunner.query(`DROP INDEX "public"."knowledge_chunk_embeddings_organization_idx"`);
    await queryRunner.query(`DROP TABLE "knowledge_chunk_embeddings"`);
  }
}
