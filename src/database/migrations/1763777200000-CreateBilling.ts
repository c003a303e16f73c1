import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateBilling1763777200000 implements MigrationInterface {
  name = 'CreateBilling1763777200000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    // One Stripe customer per organization: the primary key makes the first-need creation race
    // end with a single row, and the unique customer id maps webhooks back to the organization.
    await queryRunner.query(`
      CREATE TABLE "billing_customers" (
        "organization_id" uuid PRIMARY KEY REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "stripe_customer_id" text NOT NULL,
        "default_payment_method_id" text,
        "default_payment_method_at" timestamptz,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "updated_at" timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT "billing_customers_stripe_customer_unique" UNIQUE ("stripe_customer_id")
      )`);

    await queryRunner.query(`
      CREATE TABLE "billing_subscriptions" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "organization_id" uuid NOT NULL REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "stripe_subscription_id" text NOT NULL,
        "price_id" text,
        "status" text NOT NULL,
        "stripe_status" text NOT NULL,
        "collection_paused" boolean NOT NULL DEFAULT false,
        "cancel_at_period_end" boolean NOT NULL DEFAULT false,
        "current_period_end" timestamptz,
        "provider_updated_at" timestamptz NOT NULL,
        "revision" integer NOT NULL DEFAULT 0,
        "latest_invoice_id" text,
        "latest_invoice_status" text,
        "latest_invoice_at" timestamptz,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "updated_at" timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT "billing_subscriptions_stripe_unique" UNIQUE ("stripe_subscription_id")
      )`);
    // At most one live subscription per organization, whatever the concurrency.
    await queryRunner.query(`
      CREATE UNIQUE INDEX "billing_subscriptions_one_live_per_org"
        ON "billing_subscriptions" ("organization_id")
        WHERE "status" NOT IN ('canceled', 'incomplete_expired')`);
    await queryRunner.query(
      `CREATE INDEX "billing_subscriptions_org_idx" ON "billing_subscriptions" ("organization_id", "created_at")`,
    );

    // Stripe delivers at least once: each event id is recorded with the change it caused.
    await queryRunner.query(`
      CREATE TABLE "billing_events" (
        "id" text PRIMARY KEY,
        "type" text NOT NULL,
        "event_created_at" timestamptz NOT NULL,
        "outcome" text NOT NULL,
        "processed_at" timestamptz NOT NULL DEFAULT now()
      )`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "billing_events"`);
    await queryRunner.query(`DROP TABLE "billing_subscriptions"`);
    await queryRunner.query(`DROP TABLE "billing_customers"`);
  }
}
