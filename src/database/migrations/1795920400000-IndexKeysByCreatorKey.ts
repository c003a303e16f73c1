import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline } from '../online-index';

const INDEX = 'api_keys_created_by_api_key_idx';

/**
 * The keys a key made: removing or demoting a member walks down created_by_api_key_id from every
 * key the member made, live or not (ApiKeysRepository.revokeMadeBy), one lookup per key, which
 * read the whole organization's keys without an index. Partial: most keys are made by a user.
 *
 * Online, outside a transaction: built concurrently, so that keys are still made, rolled and
 * revoked meanwhile; an invalid index left by a build that stopped is built again. down() is
 * not online.
 */
export class IndexKeysByCreatorKey1795920400000 implements MigrationInterface {
  name = 'IndexKeysByCreatorKey1795920400000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    await createIndexOnline(
      queryRunner,
      INDEX,
      `ON "api_keys" ("created_by_api_key_id") WHERE created_by_api_key_id IS NOT NULL`,
    );
  }

  /** Not online: migration:revert runs it in a transaction. */
  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."${INDEX}"`);
  }
}
