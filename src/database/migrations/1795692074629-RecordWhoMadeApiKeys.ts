import { MigrationInterface, QueryRunner } from 'typeorm';

export class RecordWhoMadeApiKeys1795692074629 implements MigrationInterface {
  name = 'RecordWhoMadeApiKeys1795692074629';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "api_keys" ADD "created_by_api_key_id" uuid`);
    await queryRunner.query(
      `ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_created_by_one" CHECK (created_by_user_id IS NULL OR created_by_api_key_id IS NULL)`,
    );
    await queryRunner.query(
      `ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_created_by_api_key_id_fkey" FOREIGN KEY ("created_by_api_key_id") REFERENCES "api_keys"("id") ON DELETE SET NULL ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "api_keys" DROP CONSTRAINT "api_keys_created_by_api_key_id_fkey"`,
    );
    await queryRunner.query(`ALTER TABLE "api_keys" DROP CONSTRAINT "api_keys_created_by_one"`);
    await queryRunner.query(`ALTER TABLE "api_keys" DROP COLUMN "created_by_api_key_id"`);
  }
}
