import { MigrationInterface, QueryRunner } from 'typeorm';

export class CountTokensByApiKey1795879056149 implements MigrationInterface {
  name = 'CountTokensByApiKey1795879056149';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "token_usage_api_key_months" ("organization_id" uuid NOT NULL, "month" date NOT NULL, "api_key_id" uuid NOT NULL, "requests" bigint NOT NULL DEFAULT '0', "prompt_tokens" bigint NOT NULL DEFAULT '0', "completion_tokens" bigint NOT NULL DEFAULT '0', "cached_tokens" bigint NOT NULL DEFAULT '0', "total_tokens" bigint NOT NULL DEFAULT '0', CONSTRAINT "PK_52f6612a44b188f817eefaf5ecf" PRIMARY KEY ("organization_id", "month", "api_key_id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "token_usage_api_key_months_total_idx" ON "token_usage_api_key_months" ("organization_id", "month", "total_tokens", "api_key_id") `,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_api_key_months" ADD CONSTRAINT "token_usage_api_key_months_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "token_usage_api_key_months" DROP CONSTRAINT "token_usage_api_key_months_organization_id_fkey"`,
    );
    await queryRunner.query(`DROP INDEX "public"."token_usage_api_key_months_total_idx"`);
    await queryRunner.query(`DROP TABLE "token_usage_api_key_months"`);
  }
}
