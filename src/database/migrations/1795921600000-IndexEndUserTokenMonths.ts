import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline } from '../online-index';

const INDEX = 'token_usage_end_user_months_end_user_idx';

/**
 * An end user's token months by end user: the rows were reachable only through the
 * organization's (organization, month, end user) keys, so the erasure's cascade from `end_users`
 * read the whole table for every end user it deleted, and subject access (`/model`, which now
 * lists them) would have read every row of the organization.
 *
 * Online, outside a transaction: built concurrently, so that replies go on counting meanwhile; an
 * invalid index left by a build that stopped is built again. down() is not online.
 */
export class IndexEndUserTokenMonths1795921600000 implements MigrationInterface {
  name = 'IndexEndUserTokenMonths1795921600000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    await createIndexOnline(
      queryRunner,
      INDEX,
      `ON "token_usage_end_user_months" ("end_user_id", "month")`,
    );
  }

  /** Not online: migration:revert runs it in a transaction. */
  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."${INDEX}"`);
  }
}
