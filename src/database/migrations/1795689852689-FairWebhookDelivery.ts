import { MigrationInterface, QueryRunner } from 'typeorm';

export class FairWebhookDelivery1795689852689 implements MigrationInterface {
  name = 'FairWebhookDelivery1795689852689';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."webhook_delivery_attempts_due_idx"`);
    await queryRunner.query(`ALTER TABLE "webhook_endpoints" ADD "disabled_reason" text`);
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" ADD "failing_since" TIMESTAMP WITH TIME ZONE`,
    );
    await queryRunner.query(
      `CREATE INDEX "webhook_delivery_attempts_pending_idx" ON "webhook_delivery_attempts" ("endpoint_id", "next_attempt_at") WHERE status = 'pending'`,
    );
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_disabled_reason_check" CHECK (disabled_reason IN ('failing'))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "webhook_endpoints" DROP CONSTRAINT "webhook_endpoints_disabled_reason_check"`,
    );
    await queryRunner.query(`DROP INDEX "public"."webhook_delivery_attempts_pending_idx"`);
    await queryRunner.query(`ALTER TABLE "webhook_endpoints" DROP COLUMN "failing_since"`);
    await queryRunner.query(`ALTER TABLE "webhook_endpoints" DROP COLUMN "disabled_reason"`);
    await queryRunner.query(
      `CREATE INDEX "webhook_delivery_attempts_due_idx" ON "webhook_delivery_attempts" ("next_attempt_at") WHERE (status = 'pending'::text)`,
    );
  }
}
