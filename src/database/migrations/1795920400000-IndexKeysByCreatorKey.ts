import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The keys a key made: removing or demoting a member walks down created_by_api_key_id from every
 * key the member made, live or not (ApiKeysRepository.revokeMadeBy), one lookup per key, which
 * read the whole organization's keys without an index. Partial: most keys are made by a user.
 */
export class IndexKeysByCreatorKey1795920400000 implements MigrationInterface {
  name = 'IndexKeysByCreatorKey1795920400000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX "api_keys_created_by_api_key_idx" ON "api_keys" ("created_by_api_key_id") WHERE created_by_api_key_id IS NOT NULL`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."api_keys_created_by_api_key_idx"`);
  }
}
