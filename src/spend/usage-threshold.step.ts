import { cte, type Cte, type Source, Sql, sql } from '../database/sql';
import type { MonthTokensColumns } from '../usage/usage.steps';

/** The shares of the monthly budget that send `usage.threshold_reached` (contract §23). */
export const USAGE_THRESHOLDS = [50, 80, 100] as const;

export interface ThresholdCheck {
  organizationId: string;
  /**
   * The monthly token budget, or SQL reading it from an earlier step of the statement; null: no
   * budget, no row.
   */
  limit: number | string | Sql | null;
  /** The Clock's time of the change. */
  at: Date;
}

/**
 * A CTE recording each threshold of the budget that the month's tokens (`used_tokens` of
 * `tokens`, after the change) have reached, once per (organization, month, threshold): ON
 * CONFLICT DO NOTHING on the primary key, so of every reply (on any instance) that finds a
 * threshold reached only the first inserts it, and only inserted rows are returned. It lends
 * `webhook_data`, the event's `{month, threshold, used, limit}`, to webhookEventStep.
 */
export function usageThresholdStep(
  tokens: Source<MonthTokensColumns>,
  check: ThresholdCheck,
): Cte<'webhook_data'> {
  const limit =
    check.limit === null || check.limit instanceof Sql ? check.limit : String(check.limit);
  return cte(
    `${tokens.name}_threshold`,
    {
      webhook_data: sql`jsonb_build_object('month', to_char(month, 'YYYY-MM'),
                                           'threshold', threshold, 'used', used,
                                           'limit', token_limit)`,
    },
    (lent) => sql`
      INSERT INTO usage_thresholds_reached
        (organization_id, month, threshold, used, token_limit, reached_at)
      SELECT s.organization_id, s.month, t.threshold, s.used_tokens, ${limit}::bigint,
             ${check.at}::timestamptz
        FROM ${tokens.ref} s CROSS JOIN (VALUES (50), (80), (100)) AS t(threshold)
       WHERE s.organization_id = ${check.organizationId}::uuid
         AND s.used_tokens * 100 >= t.threshold * ${limit}::bigint
      ON CONFLICT DO NOTHING
      RETURNING ${lent}`,
  );
}
