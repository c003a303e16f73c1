import { Injectable } from '@nestjs/common';
import type { OrganizationPatchAudit } from '../audit/audit-event.step';
import { Database } from '../database/database';
import { Columns, type RowOf } from '../database/columns';
import { patchedColumns } from '../database/patch';
import { Cte, cte, type Sql, sql, type WithEntry, withEntries } from '../database/sql';
import { monthStartOf } from '../usage/usage.steps';
import { webhookEventStep } from '../webhooks/webhook-event.step';
import type { OrganizationLimits } from './entities/organization-limits.entity';
import { usageThresholdStep } from './usage-threshold.step';

const LIMITS = Columns.rowOf<OrganizationLimits>()(
  'monthlyTokenBudget',
  'endUserDailyTokenBudget',
  'endUserRps',
  'endUserBurst',
);

export type LimitsRow = RowOf<typeof LIMITS>;

/** The SQL of organization_limits. */
@Injectable()
export class LimitsRepository {
  constructor(private readonly database: Database) {}

  find(organizationId: string): Promise<LimitsRow | undefined> {
    return this.database.row(
      LIMITS.query`SELECT ${LIMITS} FROM organization_limits WHERE organization_id = ${organizationId}`,
      { prepared: true },
    );
  }

  /**
   * The limits `patch` gives, written onto the organization's as they are when the row is locked
   * (onto `defaults` without a row; concurrent PATCHes of different limits all land), and, in the
   * same statement, the thresholds of the monthly budget as written that the month's tokens
   * already reached (a budget lowered below what is spent): `usage.threshold_reached`, once per
   * threshold and month as when a reply crosses it; `audit` records the change there too.
   * Answers the limits as written.
   */
  async patch(
    organizationId: string,
    patch: Partial<LimitsRow>,
    defaults: LimitsRow,
    at: Date,
    audit: OrganizationPatchAudit,
    /** True while the caller may still write (users/manager-membership.ts, stillManages). */
    managing: Sql,
  ): Promise<LimitsRow | undefined> {
    const value = <Field extends keyof LimitsRow>(field: Field) =>
      patch[field] === undefined ? defaults[field] : patch[field];
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
    // Against the budget as written, named by this PATCH or kept: a reply admitted under an
    // older budget may have crossed a threshold of this one without recording it.
    const reached = usageThresholdStep(current, {
      organizationId,
      limit: sql`(SELECT monthly_token_budget FROM limits_written)`,
      at,
    });
    const written = new Cte(
      'limits_written',
      sql`INSERT INTO organization_limits AS l
          (organization_id, monthly_token_budget, end_user_daily_token_budget, end_user_rps,
           end_user_burst, updated_at)
        SELECT ${organizationId}::uuid, ${value('monthly_token_budget')}::bigint,
               ${value('end_user_daily_token_budget')}::bigint, ${value('end_user_rps')}::float8,
               ${value('end_user_burst')}::integer, ${at}::timestamptz
         WHERE ${managing}
        ON CONFLICT (organization_id) DO UPDATE SET
          ${patchedColumns('l', {
            monthly_token_budget: patch.monthly_token_budget,
            end_user_daily_token_budget: patch.end_user_daily_token_budget,
            end_user_rps: patch.end_user_rps,
            end_user_burst: patch.end_user_burst,
          })},
          updated_at = excluded.updated_at
        RETURNING organization_id, ${LIMITS}`,
      ['organization_id'],
    );
    const entries: WithEntry[] = [
      written,
      current,
      reached,
      webhookEventStep(reached, { organizationId, type: 'usage.threshold_reached', at }),
      ...audit(written),
    ];
    return this.database.row(
      withEntries(entries, LIMITS.query`SELECT ${LIMITS} FROM limits_written`),
    );
  }
}
