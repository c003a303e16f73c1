import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import type { Row } from '../database/row';
import { cte, sql, withEntries } from '../database/sql';
import { monthStartOf } from '../usage/usage.steps';
import { webhookEventStep } from '../webhooks/webhook-event.step';
import type { OrganizationLimits } from './entities/organization-limits.entity';
import { usageThresholdStep } from './usage-threshold.step';

export type LimitsRow = Row<
  OrganizationLimits,
  'monthlyTokenBudget' | 'endUserDailyTokenBudget' | 'endUserRps' | 'endUserBurst'
>;

/** The SQL of organization_limits. */
@Injectable()
export class LimitsRepository {
  constructor(private readonly database: Database) {}

  find(organizationId: string): Promise<LimitsRow | undefined> {
    return this.database.row<LimitsRow>(
      sql`SELECT monthly_token_budget, end_user_daily_token_budget, end_user_rps, end_user_burst
            FROM organization_limits WHERE organization_id = ${organizationId}`,
      { prepared: true },
    );
  }

  /**
   * Writes the organization's whole limits (the PATCH merged onto the current ones) and, in the
   * same statement, the thresholds of the new monthly budget that the month's tokens already
   * reached (a budget lowered below what is spent): `usage.threshold_reached`, once per
   * threshold and month as when a reply crosses it.
   */
  async upsert(organizationId: string, limits: LimitsRow, at: Date): Promise<void> {
    const month = monthStartOf(at);
    const current = cte(
      'limits_month_tokens',
      {
        organization_id: sql`organization_id`,
        month: sql`month`,
        used_tokens: sql`prompt_tokens + completion_tokens`,
      },
      (lent) => sql`SELECT ${lent} FROM token_usage_months
                     WHERE organization_id = ${organizationId} AND month = ${month}`,
    );
    const reached = usageThresholdStep(current, {
      organizationId,
      limit: limits.monthly_token_budget,
      at,
    });
    await this.database.rows(
      withEntries(
        [
          sql`limits_written AS (
            INSERT INTO organization_limits
              (organization_id, monthly_token_budget, end_user_daily_token_budget, end_user_rps,
               end_user_burst, updated_at)
            VALUES (${organizationId}, ${limits.monthly_token_budget},
                    ${limits.end_user_daily_token_budget}, ${limits.end_user_rps},
                    ${limits.end_user_burst}, ${at})
            ON CONFLICT (organization_id) DO UPDATE SET
              monthly_token_budget = excluded.monthly_token_budget,
              end_user_daily_token_budget = excluded.end_user_daily_token_budget,
              end_user_rps = excluded.end_user_rps, end_user_burst = excluded.end_user_burst,
              updated_at = excluded.updated_at)`,
          current,
          reached,
          webhookEventStep(reached, { organizationId, type: 'usage.threshold_reached', at }),
        ],
        sql`SELECT 1`,
      ),
    );
  }
}
