import { MigrationInterface, QueryRunner } from 'typeorm';

export class AddTokenUsageByModel1795686028230 implements MigrationInterface {
  name = 'AddTokenUsageByModel1795686028230';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "token_usage_model_months" ("organization_id" uuid NOT NULL, "month" date NOT NULL, "model" text NOT NULL, "requests" bigint NOT NULL DEFAULT '0', "prompt_tokens" bigint NOT NULL DEFAULT '0', "completion_tokens" bigint NOT NULL DEFAULT '0', "cached_tokens" bigint NOT NULL DEFAULT '0', CONSTRAINT "PK_9fd53dc0d23708abd6e7eacb397" PRIMARY KEY ("organization_id", "month", "model"))`,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_months" ADD "cached_tokens" bigint NOT NULL DEFAULT '0'`,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_model_months" ADD CONSTRAINT "token_usage_model_months_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "token_usage_model_months" DROP CONSTRAINT "token_usage_model_months_organization_id_fkey"`,
    );
    await queryRunner.query(`ALTER TABLE "token_usage_months" DROP COLUMN "cached_tokens"`);
    await queryRunner.query(`DROP TABLE "token_usage_model_months"`);
  }
}
