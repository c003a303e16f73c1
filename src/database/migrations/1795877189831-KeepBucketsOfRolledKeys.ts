import { MigrationInterface, QueryRunner } from 'typeorm';

export class KeepBucketsOfRolledKeys1795877189831 implements MigrationInterface {
  name = 'KeepBucketsOfRolledKeys1795877189831';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "api_keys" ADD "rate_limit_bucket_id" uuid`);
    // A key's bucket stays where it was: its store key was the key's id.
    await queryRunner.query(`UPDATE "api_keys" SET "rate_limit_bucket_id" = "id"`);
    await queryRunner.query(
      `ALTER TABLE "api_keys" ALTER COLUMN "rate_limit_bucket_id" SET NOT NULL`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "api_keys" DROP COLUMN "rate_limit_bucket_id"`);
  }
}
