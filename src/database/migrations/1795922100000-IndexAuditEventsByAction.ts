import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline } from '../online-index';

const INDEX = 'audit_events_organization_action_idx';

/**
 * One action's audit events, newest first (`GET /v1/audit-events?action=`, the console's Safety
 * page): the organization's (created_at, id) index, filtered on the action, read a large tenant's
 * whole log for a rare action, up to the statement timeout (found by review).
 *
 * Online, outside a transaction (createIndexOnline). down() is not online.
 */
export class IndexAuditEventsByAction1795922100000 implements MigrationInterface {
  name = 'IndexAuditEventsByAction1795922100000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    await createIndexOnline(
      queryRunner,
      INDEX,
      `ON "audit_events" ("organization_id", "action", "created_at", "id")`,
    );
  }

  /** Not online: migration:revert runs it in a transaction. */
  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."${INDEX}"`);
  }
}
