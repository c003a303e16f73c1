import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tokens a reply adds to an hour already sealed (sent to Stripe) are kept apart and sent as an
 * event of their own: added to the sealed total, they were never billed.
 */
export class CountLateMeterTokens1795923300000 implements MigrationInterface {
  name = 'CountLateMeterTokens1795923300000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "meter_token_hours" ADD "late_tokens" bigint NOT NULL DEFAULT '0'`,
    );
    await queryRunner.query(
      `ALTER TABLE "meter_token_hours" ADD "late_sends" integer NOT NULL DEFAULT '0'`,
    );
    await queryRunner.query(
      `CREATE INDEX "meter_token_hours_late_idx" ON "meter_token_hours" ("hour") WHERE late_tokens > 0`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."meter_token_hours_late_idx"`);
    await queryRunner.query(`ALTER TABLE "meter_token_hours" DROP COLUMN "late_sends"`);
    await queryRunner.query(`ALTER TABLE "meter_token_hours" DROP COLUMN "late_tokens"`);
  }
}
