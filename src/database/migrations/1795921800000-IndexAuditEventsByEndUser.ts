import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline } from '../online-index';

const INDEX = 'audit_events_end_user_target_idx';

/**
 * The audit events about one end user, in the order `/model` pages them: subject access and the
 * erasure's redaction of targets found them through the organization's (created_at, id) index,
 * filtered on the target, so both read the organization's whole audit log (a large tenant's past
 * the statement timeout). Partial: most events are about keys, members and settings.
 *
 * Online, outside a transaction (createIndexOnline). down() is not online.
 */
export class IndexAuditEventsByEndUser1795921800000 implements MigrationInterface {
  name = 'IndexAuditEventsByEndUser1795921800000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    await createIndexOnline(
      queryRunner,
      INDEX,
      `ON "audit_events" ("organization_id", "target_id", "created_at", "id")
         WHERE "target_type" = 'end_user'`,
    );
  }

  /** Not online: migration:revert runs it in a transaction. */
  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."${INDEX}"`);
  }
}
