import { sql } from '../database/sql';
import { monthOf } from './dto/usage.dto';

export interface Activity {
  organizationId: string;
  endUserId: string;
  personalityId: string;
  at: Date;
}

export interface TokensUsed {
  organizationId: string;
  at: Date;
  /** The model asked for on the route that wrote the reply; null: counted in the month only. */
  model: string | null;
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens the provider served from its prompt cache (part of promptTokens). */
  cachedTokens: number;
}

/** The first day of the UTC month of `at`, as the tables key their months. */
export const monthStartOf = (at: Date) => `${monthOf(at)}-01`;

/**
 * WITH entries for the statement that stores an exchange: the pair counts as active in the UTC
 * month of `at`, once however often and concurrently it talks. The counter moves only when the
 * month's relationship row was inserted, so repeats and concurrent first calls count once.
 */
export function relationshipActivityStep(activity: Activity) {
  return sql`relationship_month AS (
      INSERT INTO relationship_months (organization_id, month, end_user_id, personality_id, first_active_at)
      VALUES (${activity.organizationId}, ${monthStartOf(activity.at)}, ${activity.endUserId},
              ${activity.personalityId}, ${activity.at})
      ON CONFLICT DO NOTHING
      RETURNING organization_id, month),
    relationship_counter AS (
      INSERT INTO usage_monthly_counters (organization_id, month, active_relationships)
      SELECT organization_id, month, 1 FROM relationship_month
      ON CONFLICT (organization_id, month)
      DO UPDATE SET active_relationships = usage_monthly_counters.active_relationships + 1)`;
}

/**
 * WITH entries adding a completed reply's token counts to its organization's month and to the
 * month of the model that wrote it. Its text does not depend on the values (a reply without a
 * model inserts no model row), so a named statement can carry it.
 */
export function tokenUsageStep(tokens: TokensUsed) {
  const month = monthStartOf(tokens.at);
  return sql`token_month AS (
      INSERT INTO token_usage_months (organization_id, month, requests, prompt_tokens,
                                      completion_tokens, cached_tokens)
      VALUES (${tokens.organizationId}, ${month}, 1, ${tokens.promptTokens},
              ${tokens.completionTokens}, ${tokens.cachedTokens})
      ON CONFLICT (organization_id, month) DO UPDATE
        SET requests = token_usage_months.requests + 1,
            prompt_tokens = token_usage_months.prompt_tokens + EXCLUDED.prompt_tokens,
            completion_tokens = token_usage_months.completion_tokens + EXCLUDED.completion_tokens,
            cached_tokens = token_usage_months.cached_tokens + EXCLUDED.cached_tokens),
    token_model_month AS (
      INSERT INTO token_usage_model_months (organization_id, month, model, requests, prompt_tokens,
                                            completion_tokens, cached_tokens)
      SELECT ${tokens.organizationId}::uuid, ${month}::date, model, 1, ${tokens.promptTokens}::bigint,
             ${tokens.completionTokens}::bigint, ${tokens.cachedTokens}::bigint
        FROM (SELECT ${tokens.model}::text AS model) AS reply WHERE model IS NOT NULL
      ON CONFLICT (organization_id, month, model) DO UPDATE
        SET requests = token_usage_model_months.requests + 1,
            prompt_tokens = token_usage_model_months.prompt_tokens + EXCLUDED.prompt_tokens,
            completion_tokens = token_usage_model_months.completion_tokens + EXCLUDED.completion_tokens,
            cached_tokens = token_usage_model_months.cached_tokens + EXCLUDED.cached_tokens)`;
}
