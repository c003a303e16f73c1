import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline, has, withShortLocks } from '../online-index';

/** The checked foreign keys of the two columns: added NOT VALID, then validated. */
const FOREIGN_KEYS = [
  ['webhook_endpoints_created_by_user_id_fkey', 'created_by_user_id', 'users'],
  ['webhook_endpoints_created_by_api_key_id_fkey', 'created_by_api_key_id', 'api_keys'],
] as const;

/**
 * Who made each webhook endpoint, or last changed its URL: the user whose access token did, or
 * the API key that did (at most one; both null for endpoints made before this). A password reset that takes an address
 * back disables the endpoints its user made, in any organization, directly or through a key they
 * made (WebhooksRepository.disableEndpointsTakenBack). Both columns are nullable and empty for
 * existing rows: adding them rewrites nothing.
 *
 * Online, outside a transaction, as OrganizationsNameTheirCreator: the columns, the check and the
 * foreign keys (NOT VALID) are added under locks held for an instant (withShortLocks), the keys
 * then validated (which blocks no reader or writer) and the indexes built concurrently. Each step
 * can run again should the migration stop half way. Until 2026-12-07 it ran in one transaction:
 * it waited without limit behind any open transaction that had read webhook_endpoints, every
 * later reader queued behind it, and its plain index on api_keys blocked every sign-up and key
 * use while it was built (0.8 s at 1,000,000 keys; found by review). The schema it leaves is the
 * same.
 */
export class WebhookEndpointsNameTheirCreator1795922800000 implements MigrationInterface {
  name = 'WebhookEndpointsNameTheirCreator1795922800000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    await withShortLocks(queryRunner, async () => {
      if (!(await has(queryRunner, 'column', 'webhook_endpoints', 'created_by_user_id'))) {
        await queryRunner.query(
          `ALTER TABLE "webhook_endpoints" ADD COLUMN IF NOT EXISTS "created_by_user_id" uuid, ADD COLUMN IF NOT EXISTS "created_by_api_key_id" uuid`,
        );
      }
      if (
        !(await has(
          queryRunner,
          'constraint',
          'webhook_endpoints',
          'webhook_endpoints_created_by_one',
        ))
      ) {
        // Both columns are empty: checking the rows reads the table, which is small, and writes nothing.
        await queryRunner.query(
          `ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_created_by_one" CHECK (created_by_user_id IS NULL OR created_by_api_key_id IS NULL)`,
        );
      }
      for (const [name, column, table] of FOREIGN_KEYS) {
        if (await has(queryRunner, 'constraint', 'webhook_endpoints', name)) continue;
        await queryRunner.query(
          `ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "${name}" FOREIGN KEY ("${column}") REFERENCES "${table}"("id") ON DELETE SET NULL ON UPDATE NO ACTION NOT VALID`,
        );
      }
    });
    for (const [name] of FOREIGN_KEYS) {
      await queryRunner.query(`ALTER TABLE "webhook_endpoints" VALIDATE CONSTRAINT "${name}"`);
    }
    await createIndexOnline(
      queryRunner,
      'webhook_endpoints_created_by_user_idx',
      `ON "webhook_endpoints" ("created_by_user_id") WHERE created_by_user_id IS NOT NULL`,
    );
    await createIndexOnline(
      queryRunner,
      'webhook_endpoints_created_by_api_key_idx',
      `ON "webhook_endpoints" ("created_by_api_key_id") WHERE created_by_api_key_id IS NOT NULL`,
    );
    // The keys a user made, in any organization: where a takeback's walk down their lines starts.
    await createIndexOnline(
      queryRunner,
      'api_keys_created_by_user_idx',
      `ON "api_keys" ("created_by_user_id") WHERE created_by_user_id IS NOT NULL`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    // Behind a long transaction on the tables, given up after 10 s (TypeORM reverts in a
    // transaction of its own).
    await queryRunner.query(`SET LOCAL lock_timeout = '10s'`);
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."api_keys_created_by_user_idx"`);
    await queryRunner.query(
      `DROP INDEX IF EXISTS "public"."webhook_endpoints_created_by_api_key_idx"`,
    );
    await queryRunner.query(
      `DROP INDEX IF EXISTS "public"."webhook_endpoints_created_by_user_idx"`,
    );
    for (const [name] of FOREIGN_KEYS) {
      await queryRunner.query(
        `ALTER TABLE "webhook_endpoints" DROP CONSTRAINT IF EXISTS "${name}"`,
      );
    }
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" DROP CONSTRAINT IF EXISTS "webhook_endpoints_created_by_one"`,
    );
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" DROP COLUMN IF EXISTS "created_by_api_key_id", DROP COLUMN IF EXISTS "created_by_user_id"`,
    );
  }
}
