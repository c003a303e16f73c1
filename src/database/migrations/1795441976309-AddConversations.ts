import { MigrationInterface, QueryRunner } from 'typeorm';

export class AddConversations1795441976309 implements MigrationInterface {
  name = 'AddConversations1795441976309';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "token_usage_months" ("organization_id" uuid NOT NULL, "month" date NOT NULL, "requests" bigint NOT NULL DEFAULT '0', "prompt_tokens" bigint NOT NULL DEFAULT '0', "completion_tokens" bigint NOT NULL DEFAULT '0', CONSTRAINT "PK_e4739e734e1d01e8588a06974e6" PRIMARY KEY ("organization_id", "month"))`,
    );
    await queryRunner.query(`ALTER TABLE "personalities" ADD "model" text`);
    await queryRunner.query(
      `ALTER TABLE "token_usage_months" ADD CONSTRAINT "token_usage_months_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "token_usage_months" DROP CONSTRAINT "token_usage_months_organization_id_fkey"`,
    );
    await queryRunner.query(`ALTER TABLE "personalities" DROP COLUMN "model"`);
    await queryRunner.query(`DROP TABLE "token_usage_months"`);
  }
}
