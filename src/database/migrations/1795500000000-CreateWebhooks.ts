import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Outbound webhooks (docs/webhooks.md): the endpoints, the outbox of events (written in the
 * transaction of each change) and the delivery attempts, which are also the work queue.
 */
export class CreateWebhooks1795500000000 implements MigrationInterface {
  name = 'CreateWebhooks1795500000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE "webhook_endpoints" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "organization_id" uuid NOT NULL
          CONSTRAINT "webhook_endpoints_organization_id_fkey" REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "url" text NOT NULL,
        "description" text,
        "events" text[] NOT NULL,
        "status" text NOT NULL DEFAULT 'enabled'
          CONSTRAINT "webhook_endpoints_status_check" CHECK (status IN ('enabled', 'disabled')),
        "secret" text NOT NULL,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "updated_at" timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(
      `CREATE INDEX "webhook_endpoints_organization_idx" ON "webhook_endpoints" ("organization_id", "created_at", "id")`,
    );

    await queryRunner.query(`
      CREATE TABLE "webhook_events" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "organization_id" uuid NOT NULL
          CONSTRAINT "webhook_events_organization_id_fkey" REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "type" text NOT NULL,
        "data" jsonb NOT NULL,
        "created_at" timestamptz NOT NULL DEFAULT clock_timestamp()
      )`);
    // The retention purge's range scan.
    await queryRunner.query(
      `CREATE INDEX "webhook_events_created_at_idx" ON "webhook_events" ("created_at")`,
    );

    await queryRunner.query(`
      CREATE TABLE "webhook_delivery_attempts" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "organization_id" uuid NOT NULL
          CONSTRAINT "webhook_delivery_attempts_organization_id_fkey" REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "endpoint_id" uuid NOT NULL
          CONSTRAINT "webhook_delivery_attempts_endpoint_id_fkey" REFERENCES "webhook_endpoints" ("id") ON DELETE CASCADE,
        "event_id" uuid NOT NULL
          CONSTRAINT "webhook_delivery_attempts_event_id_fkey" REFERENCES "webhook_events" ("id") ON DELETE CASCADE,
        "event_type" text NOT NULL,
        "attempt" integer NOT NULL,
        "status" text NOT NULL DEFAULT 'pending'
          CONSTRAINT "webhook_delivery_attempts_status_check" CHECK (status IN ('pending', 'succeeded', 'failed')),
        "response_status" integer,
        "error" text,
        "duration_ms" integer,
        "created_at" timestamptz NOT NULL DEFAULT clock_timestamp(),
        "next_attempt_at" timestamptz,
        "locked_until" timestamptz,
        "lock_token" uuid
      )`);
    // One row per attempt number: an attempt cannot be scheduled twice.
    await queryRunner.query(
      `CREATE UNIQUE INDEX "webhook_delivery_attempts_event_endpoint_attempt_unique"
         ON "webhook_delivery_attempts" ("event_id", "endpoint_id", "attempt")`,
    );
    await queryRunner.query(
      `CREATE INDEX "webhook_delivery_attempts_endpoint_idx"
         ON "webhook_delivery_attempts" ("endpoint_id", "created_at", "id")`,
    );
    // The queue: only pending attempts, in the order they fall due.
    await queryRunner.query(
      `CREATE INDEX "webhook_delivery_attempts_due_idx"
         ON "webhook_delivery_attempts" ("next_attempt_at") WHERE status = 'pending'`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "webhook_delivery_attempts"`);
    await queryRunner.query(`DROP TABLE "webhook_events"`);
    await queryRunner.query(`DROP TABLE "webhook_endpoints"`);
  }
}
