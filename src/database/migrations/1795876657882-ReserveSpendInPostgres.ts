import { MigrationInterface, QueryRunner } from 'typeorm';

export class ReserveSpendInPostgres1795876657882 implements MigrationInterface {
  name = 'ReserveSpendInPostgres1795876657882';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "spend_reservations" ("organization_id" uuid NOT NULL, "budget" text NOT NULL, "reservation_id" uuid NOT NULL, "tokens" integer NOT NULL, "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "spend_reservations_tokens_check" CHECK (tokens > 0), CONSTRAINT "PK_94af99bff9db1219449eb298bb3" PRIMARY KEY ("organization_id", "budget", "reservation_id"))`,
    );
    // Check and reserve against an organization's monthly and an end user's daily token budget,
    // atomically across instances (contract §23, §29; docs/spend-control.md). A function, so that
    // it is one round trip and each statement in it reads a snapshot taken after the budget's
    // lock was granted (a VOLATILE function's statements each take their own under READ
    // COMMITTED): a single SQL statement would read the snapshot of its start, from before the
    // lock, and miss the reservations committed while it waited. The locks are transaction-level:
    // held until the caller's statement commits, just after the insert. A null limit is no budget.
    await queryRunner.query(`
      CREATE FUNCTION spend_reserve(
        p_organization_id uuid,
        p_month_budget text, p_month date, p_month_limit bigint,
        p_end_user_id uuid, p_day_budget text, p_day date, p_day_limit bigint,
        p_reservation_id uuid, p_tokens integer, p_now timestamptz, p_expires_at timestamptz)
      RETURNS TABLE (refused_scope text, counted bigint)
      LANGUAGE plpgsql VOLATILE
      AS $$
      DECLARE
        month_counted bigint;
        day_counted bigint;
      BEGIN
        -- Always the month's lock before the day's: two replies never wait for each other's.
        IF p_month_limit IS NOT NULL THEN
          PERFORM pg_advisory_xact_lock(
            hashtextextended('spend_reservations:' || p_organization_id || ':' || p_month_budget, 0));
        END IF;
        IF p_day_limit IS NOT NULL THEN
          PERFORM pg_advisory_xact_lock(
            hashtextextended('spend_reservations:' || p_organization_id || ':' || p_day_budget, 0));
        END IF;
        IF p_month_limit IS NOT NULL THEN
          month_counted :=
            coalesce((SELECT u.prompt_tokens + u.completion_tokens FROM token_usage_months u
                       WHERE u.organization_id = p_organization_id AND u.month = p_month), 0)
            + coalesce((SELECT sum(r.tokens) FROM spend_reservations r
                         WHERE r.organization_id = p_organization_id
                           AND r.budget = p_month_budget AND r.expires_at > p_now), 0);
          IF month_counted >= p_month_limit THEN
            RETURN QUERY SELECT 'organization'::text, month_counted;
            RETURN;
          END IF;
        END IF;
        IF p_day_limit IS NOT NULL THEN
          day_counted :=
            coalesce((SELECT d.tokens FROM end_user_token_days d
                       WHERE d.end_user_id = p_end_user_id AND d.day = p_day), 0)
            + coalesce((SELECT sum(r.tokens) FROM spend_reservations r
                         WHERE r.organization_id = p_organization_id
                           AND r.budget = p_day_budget AND r.expires_at > p_now), 0);
          IF day_counted >= p_day_limit THEN
            RETURN QUERY SELECT 'end_user'::text, day_counted;
            RETURN;
          END IF;
        END IF;
        IF p_tokens > 0 THEN
          INSERT INTO spend_reservations (organization_id, budget, reservation_id, tokens, expires_at)
          SELECT p_organization_id, b.budget, p_reservation_id, p_tokens, p_expires_at
            FROM (VALUES (p_month_budget, p_month_limit), (p_day_budget, p_day_limit))
                 AS b(budget, budget_limit)
           WHERE b.budget_limit IS NOT NULL;
        END IF;
        RETURN QUERY SELECT NULL::text, NULL::bigint;
      END
      $$`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `DROP FUNCTION spend_reserve(uuid, text, date, bigint, uuid, text, date, bigint, uuid, integer, timestamptz, timestamptz)`,
    );
    await queryRunner.query(`DROP TABLE "spend_reservations"`);
  }
}
