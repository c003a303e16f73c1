import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Who made each webhook endpoint, or last changed its URL: the user whose access token did, or
 * the API key that did (at most one; both null for endpoints made before this). A password reset that takes an address
 * back disables the endpoints its user made, in any organization, directly or through a key they
 * made (WebhooksRepository.disableEndpointsTakenBack). Both columns are nullable and empty for
 * existing rows: adding them rewrites nothing.
 */
export class WebhookEndpointsNameTheirCreator1795922800000 implements MigrationInterface {
  name = 'WebhookEndpointsNameTheirCreator1795922800000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" ADD "created_by_user_id" uuid, ADD "created_by_api_key_id" uuid`,
    );
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_created_by_one" CHECK (created_by_user_id IS NULL OR created_by_api_key_id IS NULL)`,
    );
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_created_by_user_id_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "users"("id") ON DELETE SET NULL ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_created_by_api_key_id_fkey" FOREIGN KEY ("created_by_api_key_id") REFERENCES "api_keys"("id") ON DELETE SET NULL ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `CREATE INDEX "webhook_endpoints_created_by_user_idx" ON "webhook_endpoints" ("created_by_user_id") WHERE created_by_user_id IS NOT NULL`,
    );
    await queryRunner.query(
      `CREATE INDEX "webhook_endpoints_created_by_api_key_idx" ON "webhook_endpoints" ("created_by_api_key_id") WHERE created_by_api_key_id IS NOT NULL`,
    );
    // The keys a user made, in any organization: where a takeback's walk down their lines starts.
    await queryRunner.query(
      `CREATE INDEX "api_keys_created_by_user_idx" ON "api_keys" ("created_by_user_id") WHERE created_by_user_id IS NOT NULL`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "api_keys_created_by_user_idx"`);
    await queryRunner.query(`DROP INDEX "webhook_endpoints_created_by_api_key_idx"`);
    await queryRunner.query(`DROP INDEX "webhook_endpoints_created_by_user_idx"`);
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" DROP CONSTRAINT "webhook_endpoints_created_by_api_key_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" DROP CONSTRAINT "webhook_endpoints_created_by_user_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" DROP CONSTRAINT "webhook_endpoints_created_by_one"`,
    );
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" DROP COLUMN "created_by_api_key_id", DROP COLUMN "created_by_user_id"`,
    );
  }
}
