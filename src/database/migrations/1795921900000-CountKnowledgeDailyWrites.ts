import { MigrationInterface, QueryRunner } from 'typeorm';

/** The content bytes each organization writes a UTC day (KNOWLEDGE_DAILY_BYTES). */
export class CountKnowledgeDailyWrites1795921900000 implements MigrationInterface {
  name = 'CountKnowledgeDailyWrites1795921900000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "knowledge_daily_writes" ("organization_id" uuid NOT NULL, "day" date NOT NULL, "bytes" bigint NOT NULL, CONSTRAINT "knowledge_daily_writes_pkey" PRIMARY KEY ("organization_id", "day"))`,
    );
    await queryRunner.query(
      `ALTER TABLE "knowledge_daily_writes" ADD CONSTRAINT "knowledge_daily_writes_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "knowledge_daily_writes"`);
  }
}
