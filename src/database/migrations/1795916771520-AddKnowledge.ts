import { MigrationInterface, QueryRunner } from 'typeorm';

/** Knowledge documents, their chunks and their attachments to personalities (contract §27). */
export class AddKnowledge1795916771520 implements MigrationInterface {
  name = 'AddKnowledge1795916771520';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "knowledge_documents" ("id" uuid NOT NULL DEFAULT uuid_generate_v4(), "organization_id" uuid NOT NULL, "title" text NOT NULL, "language" text NOT NULL, "search_config" text NOT NULL, "content" text NOT NULL, "bytes" integer NOT NULL, "chunks" integer NOT NULL, "all_personalities" boolean NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_402a3c43fb263aa5289670e4e21" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "knowledge_documents_list_idx" ON "knowledge_documents" ("organization_id", "created_at", "id") `,
    );
    await queryRunner.query(
      `CREATE TABLE "knowledge_chunks" ("document_id" uuid NOT NULL, "chunk_index" integer NOT NULL, "organization_id" uuid NOT NULL, "search_config" text NOT NULL, "text" text NOT NULL, "search" tsvector NOT NULL, CONSTRAINT "PK_47fa8af657e1aa62ea10aa16836" PRIMARY KEY ("document_id", "chunk_index"))`,
    );
    // Search within one organization's chunks only (btree_gin: AddMemoryThatLasts created it).
    await queryRunner.query(
      `CREATE INDEX "knowledge_chunks_search_idx" ON "knowledge_chunks" USING gin ("organization_id", "search")`,
    );
    await queryRunner.query(
      `CREATE TABLE "knowledge_attachments" ("document_id" uuid NOT NULL, "personality_id" uuid NOT NULL, "organization_id" uuid NOT NULL, CONSTRAINT "PK_d2fb213807fe8c28b48ff0661c3" PRIMARY KEY ("document_id", "personality_id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "knowledge_attachments_personality_idx" ON "knowledge_attachments" ("personality_id") `,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_documents" ADD CONSTRAINT "knowledge_documents_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_chunks" ADD CONSTRAINT "knowledge_chunks_document_id_fkey" FOREIGN KEY ("document_id") REFERENCES "knowledge_documents"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_attachments" ADD CONSTRAINT "knowledge_attachments_document_id_fkey" FOREIGN KEY ("document_id") REFERENCES "knowledge_documents"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_attachments" ADD CONSTRAINT "knowledge_attachments_personality_id_fkey" FOREIGN KEY ("personality_id") REFERENCES "personalities"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "knowledge_attachments" DROP CONSTRAINT "knowledge_attachments_personality_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_attachments" DROP CONSTRAINT "knowledge_attachments_document_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_chunks" DROP CONSTRAINT "knowledge_chunks_document_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_documents" DROP CONSTRAINT "knowledge_documents_organization_id_fkey"`,
    );
    await queryRunner.query(`DROP INDEX "public"."knowledge_attachments_personality_idx"`);
    await queryRunner.query(`DROP TABLE "knowledge_attachments"`);
    await queryRunner.query(`DROP INDEX "public"."knowledge_chunks_search_idx"`);
    await queryRunner.query(`DROP TABLE "knowledge_chunks"`);
    await queryRunner.query(`DROP INDEX "public"."knowledge_documents_list_idx"`);
    await queryRunner.query(`DROP TABLE "knowledge_documents"`);
  }
}
