import { MigrationInterface, QueryRunner } from 'typeorm';

export class AddSpendControl1795689452077 implements MigrationInterface {
  name = 'AddSpendControl1795689452077';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "token_usage_personality_months" ("organization_id" uuid NOT NULL, "month" date NOT NULL, "personality_id" uuid NOT NULL, "requests" bigint NOT NULL DEFAULT '0', "prompt_tokens" bigint NOT NULL DEFAULT '0', "completion_tokens" bigint NOT NULL DEFAULT '0', "cached_tokens" bigint NOT NULL DEFAULT '0', "total_tokens" bigint NOT NULL DEFAULT '0', CONSTRAINT "PK_7749230165ec572b4c9715a093b" PRIMARY KEY ("organization_id", "month", "personality_id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "token_usage_personality_months_total_idx" ON "token_usage_personality_months" ("organization_id", "month", "total_tokens", "personality_id") `,
    );
    await queryRunner.query(
      `CREATE TABLE "token_usage_end_user_months" ("organization_id" uuid NOT NULL, "month" date NOT NULL, "end_user_id" uuid NOT NULL, "requests" bigint NOT NULL DEFAULT '0', "prompt_tokens" bigint NOT NULL DEFAULT '0', "completion_tokens" bigint NOT NULL DEFAULT '0', "cached_tokens" bigint NOT NULL DEFAULT '0', "total_tokens" bigint NOT NULL DEFAULT '0', CONSTRAINT "PK_97e3aa302e55d323efa365f02a1" PRIMARY KEY ("organization_id", "month", "end_user_id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "token_usage_end_user_months_total_idx" ON "token_usage_end_user_months" ("organization_id", "month", "total_tokens", "end_user_id") `,
    );
    await queryRunner.query(
      `CREATE TABLE "token_usage_days" ("organization_id" uuid NOT NULL, "day" date NOT NULL, "requests" bigint NOT NULL DEFAULT '0', "prompt_tokens" bigint NOT NULL DEFAULT '0', "completion_tokens" bigint NOT NULL DEFAULT '0', "cached_tokens" bigint NOT NULL DEFAULT '0', CONSTRAINT "PK_a4d629f2f8889dce99d87b0e574" PRIMARY KEY ("organization_id", "day"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "end_user_token_days" ("end_user_id" uuid NOT NULL, "organization_id" uuid NOT NULL, "day" date NOT NULL, "tokens" bigint NOT NULL DEFAULT '0', CONSTRAINT "PK_dff4e0ac6982ee9eb32ac43dcbb" PRIMARY KEY ("end_user_id"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "usage_thresholds_reached" ("organization_id" uuid NOT NULL, "month" date NOT NULL, "threshold" smallint NOT NULL, "used" bigint NOT NULL, "token_limit" bigint NOT NULL, "reached_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "usage_thresholds_reached_month_check" CHECK (extract(day FROM month) = 1), CONSTRAINT "usage_thresholds_reached_threshold_check" CHECK (threshold IN (50, 80, 100)), CONSTRAINT "PK_0ea1ca39605ad4d88ff39446c42" PRIMARY KEY ("organization_id", "month", "threshold"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "organization_limits" ("organization_id" uuid NOT NULL, "monthly_token_budget" bigint, "end_user_daily_token_budget" bigint, "end_user_rps" double precision, "end_user_burst" integer, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "organization_limits_end_user_bucket_check" CHECK ((end_user_rps IS NULL) = (end_user_burst IS NULL) AND end_user_rps > 0 AND end_user_burst >= 1), CONSTRAINT "organization_limits_daily_check" CHECK (end_user_daily_token_budget >= 1), CONSTRAINT "organization_limits_monthly_check" CHECK (monthly_token_budget >= 1), CONSTRAINT "PK_eb6dfc156ba0a4f6658f33187af" PRIMARY KEY ("organization_id"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "meter_token_hours" ("organization_id" uuid NOT NULL, "hour" TIMESTAMP WITH TIME ZONE NOT NULL, "tokens" bigint NOT NULL DEFAULT '0', "sealed" boolean NOT NULL DEFAULT false, CONSTRAINT "PK_85bd3af341d3c15716ea1ffa9ca" PRIMARY KEY ("organization_id", "hour"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "meter_token_hours_open_idx" ON "meter_token_hours" ("hour") WHERE NOT sealed`,
    );
    await queryRunner.query(
      `CREATE TABLE "meter_events" ("id" uuid NOT NULL DEFAULT uuid_generate_v4(), "organization_id" uuid NOT NULL, "kind" text NOT NULL, "event_name" text NOT NULL, "identifier" text NOT NULL, "stripe_customer_id" text NOT NULL, "value" bigint NOT NULL, "occurred_at" TIMESTAMP WITH TIME ZONE NOT NULL, "month" date NOT NULL, "status" text NOT NULL DEFAULT 'pending', "attempts" integer NOT NULL DEFAULT '0', "next_attempt_at" TIMESTAMP WITH TIME ZONE NOT NULL, "locked_until" TIMESTAMP WITH TIME ZONE, "lock_token" uuid, "last_error" text, "delivered_at" TIMESTAMP WITH TIME ZONE, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "meter_events_identifier_unique" UNIQUE ("identifier"), CONSTRAINT "meter_events_month_check" CHECK (extract(day FROM month) = 1), CONSTRAINT "meter_events_status_check" CHECK (status IN ('pending', 'delivered', 'expired')), CONSTRAINT "meter_events_kind_check" CHECK (kind IN ('relationship', 'tokens')), CONSTRAINT "PK_db987a46375dbbe68715a0a5922" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "meter_events_pending_idx" ON "meter_events" ("organization_id", "month") WHERE status = 'pending'`,
    );
    await queryRunner.query(
      `CREATE INDEX "meter_events_due_idx" ON "meter_events" ("next_attempt_at") WHERE status = 'pending'`,
    );
    await queryRunner.query(`ALTER TABLE "api_keys" ADD "rate_limit_rps" double precision`);
    await queryRunner.query(`ALTER TABLE "api_keys" ADD "rate_limit_burst" integer`);
    await queryRunner.query(
      `ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_rate_limit_check" CHECK ((rate_limit_rps IS NULL) = (rate_limit_burst IS NULL) AND rate_limit_rps > 0 AND rate_limit_burst >= 1)`,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_personality_months" ADD CONSTRAINT "token_usage_personality_months_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_end_user_months" ADD CONSTRAINT "token_usage_end_user_months_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_end_user_months" ADD CONSTRAINT "token_usage_end_user_months_end_user_id_fkey" FOREIGN KEY ("end_user_id") REFERENCES "end_users"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_days" ADD CONSTRAINT "token_usage_days_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "end_user_token_days" ADD CONSTRAINT "end_user_token_days_end_user_id_fkey" FOREIGN KEY ("end_user_id") REFERENCES "end_users"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "end_user_token_days" ADD CONSTRAINT "end_user_token_days_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "usage_thresholds_reached" ADD CONSTRAINT "usage_thresholds_reached_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "organization_limits" ADD CONSTRAINT "organization_limits_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "meter_token_hours" ADD CONSTRAINT "meter_token_hours_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "meter_events" ADD CONSTRAINT "meter_events_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "meter_events" DROP CONSTRAINT "meter_events_organization_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "meter_token_hours" DROP CONSTRAINT "meter_token_hours_organization_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "organization_limits" DROP CONSTRAINT "organization_limits_organization_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "usage_thresholds_reached" DROP CONSTRAINT "usage_thresholds_reached_organization_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "end_user_token_days" DROP CONSTRAINT "end_user_token_days_organization_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "end_user_token_days" DROP CONSTRAINT "end_user_token_days_end_user_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_days" DROP CONSTRAINT "token_usage_days_organization_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_end_user_months" DROP CONSTRAINT "token_usage_end_user_months_end_user_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_end_user_months" DROP CONSTRAINT "token_usage_end_user_months_organization_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "token_usage_personality_months" DROP CONSTRAINT "token_usage_personality_months_organization_id_fkey"`,
    );
    await queryRunner.query(`ALTER TABLE "api_keys" DROP CONSTRAINT "api_keys_rate_limit_check"`);
    await queryRunner.query(`ALTER TABLE "api_keys" DROP COLUMN "rate_limit_burst"`);
    await queryRunner.query(`ALTER TABLE "api_keys" DROP COLUMN "rate_limit_rps"`);
    await queryRunner.query(`DROP INDEX "public"."meter_events_due_idx"`);
    await queryRunner.query(`DROP INDEX "public"."meter_events_pending_idx"`);
    await queryRunner.query(`DROP TABLE "meter_events"`);
    await queryRunner.query(`DROP INDEX "public"."meter_token_hours_open_idx"`);
    await queryRunner.query(`DROP TABLE "meter_token_hours"`);
    await queryRunner.query(`DROP TABLE "organization_limits"`);
    await queryRunner.query(`DROP TABLE "usage_thresholds_reached"`);
    await queryRunner.query(`DROP TABLE "end_user_token_days"`);
    await queryRunner.query(`DROP TABLE "token_usage_days"`);
    await queryRunner.query(`DROP INDEX "public"."token_usage_end_user_months_total_idx"`);
    await queryRunner.query(`DROP TABLE "token_usage_end_user_months"`);
    await queryRunner.query(`DROP INDEX "public"."token_usage_personality_months_total_idx"`);
    await queryRunner.query(`DROP TABLE "token_usage_personality_months"`);
  }
}
