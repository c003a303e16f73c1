import { MigrationInterface, QueryRunner } from 'typeorm';

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
    const [{ valid }] = (await queryRunner.query(
      `SELECT bool_and(i.indisvalid) AS valid FROM pg_index i WHERE i.indexrelid = to_regclass($1)`,
      [`public.${INDEX}`],
    )) as Array<{ valid: boolean | null }>;
    if (valid) return;
    if (valid === false) await queryRunner.query(`DROP INDEX CONCURRENTLY "public"."${INDEX}"`);
    // A concurrent build waits for every older transaction and blocks no one: no lock timeout.
    await queryRunner.query(`SET lock_timeout = 0`);
    await queryRunner.query(
      `CREATE INDEX CONCURRENTLY "${INDEX}" ON "api_keys" ("created_by_api_key_id") WHERE created_by_api_key_id IS NOT NULL`,
    );
    await queryRunner.query(`RESET lock_timeout`);
  }

  /** Not online: migration:revert runs it in a transaction. */
  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."${INDEX}"`);
  }
}
