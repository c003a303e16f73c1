import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline, has, withShortLocks } from '../online-index';

const INDEX = 'meter_token_hours_late_idx';

/**
 * Tokens a reply adds to an hour already sealed (sent to Stripe) are kept apart and sent as an
 * event of their own: added to the sealed total, they were never billed.
 *
 * Outside a transaction: the columns (a constant default, no rewrite) each take the table's lock
 * for an instant, and the index is built online (createIndexOnline), as replies write the table
 * (review of the change). It can run again should it stop half way. down() is not online.
 */
export class CountLateMeterTokens1795923300000 implements MigrationInterface {
  name = 'CountLateMeterTokens1795923300000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    await withShortLocks(queryRunner, async () => {
      if (!(await has(queryRunner, 'column', 'meter_token_hours', 'late_tokens'))) {
        await queryRunner.query(
          `ALTER TABLE "meter_token_hours" ADD "late_tokens" bigint NOT NULL DEFAULT '0'`,
        );
      }
      if (!(await has(queryRunner, 'column', 'meter_token_hours', 'late_sends'))) {
        await queryRunner.query(
          `ALTER TABLE "meter_token_hours" ADD "late_sends" integer NOT NULL DEFAULT '0'`,
        );
      }
    });
    await createIndexOnline(
      queryRunner,
      INDEX,
      `ON "meter_token_hours" ("hour") WHERE late_tokens > 0`,
    );
  }

  /** Not online: migration:revert runs it in a transaction. */
  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."${INDEX}"`);
    await queryRunner.query(`ALTER TABLE "meter_token_hours" DROP COLUMN IF EXISTS "late_sends"`);
    await queryRunner.query(`ALTER TABLE "meter_token_hours" DROP COLUMN IF EXISTS "late_tokens"`);
  }
}
