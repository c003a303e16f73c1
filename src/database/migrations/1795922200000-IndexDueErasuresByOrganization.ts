import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline } from '../online-index';

const INDEX = 'end_users_erasure_due_by_organization_idx';

/**
 * End users awaiting erasure, by organization: the erasure's claim visits the organizations with
 * one due (an index probe each) and takes each one's longest-due end users, so organizations take
 * turns without the claim reading every due row (found by review).
 *
 * Online, outside a transaction (createIndexOnline). down() is not online.
 */
export class IndexDueErasuresByOrganization1795922200000 implements MigrationInterface {
  name = 'IndexDueErasuresByOrganization1795922200000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    await createIndexOnline(
      queryRunner,
      INDEX,
      `ON "end_users" ("organization_id", "erase_after", "id") WHERE status = 'deleting'`,
    );
  }

  /** Not online: migration:revert runs it in a transaction. */
  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."${INDEX}"`);
  }
}
