import { empty, LendingEntries, raw, sql } from '../database/sql';
import { monthOf } from './dto/usage.dto';
import { SIGNED_IN_USERS_KEY_ID } from './entities/token-usage-api-key-month.entity';
import { utcDay } from '../common/time/utc-day';

export interface Activity {
  organizationId: string;
  endUserId: string;
  personalityId: string;
  at: Date;
}

export interface TokensUsed {
  organizationId: string;
  /** The end user and personality of the reply: the breakdown's rollups and the daily budget. */
  endUserId: string;
  personalityId: string;
  /** The API key that asked for the reply; null: a user's access token (the `api_key` breakdown). */
  apiKeyId: string | null;
  at: Date;
  /** The model asked for on the route that wrote the reply; null: counted in the month only. */
  model: string | null;
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens the provider served from its prompt cache (part of promptTokens). */
  cachedTokens: number;
  /**
   * Replies these tokens count as (`requests`): 1, the default, for a reply's; 0 for the tokens of
   * a turn's model calls written before it has a reply (it paused for client tools, or failed).
   */
  replies?: 0 | 1;
  /**
   * The end user was erased while the turn ran: the end user's rollups went with them (their
   * rows would fail the foreign key); the organization's, the personality's and the key's stay.
   */
  endUserErased?: boolean;
}

/** The first day of the UTC month of `at`, as the tables key their months. */
export const monthStartOf = (at: Date) => `${monthOf(at)}-01`;

/** The columns of a relationship counted for the first time in its month. */
export type NewRelationshipColumns = 'organization_id' | 'month' | 'end_user_id' | 'personality_id';

/** The columns of the month's token counts after a reply added its own. */
export type MonthTokensColumns = 'organization_id' | 'month' | 'used_tokens';

/**
 * WITH entries for the statement that stores an exchange: the pair counts as active in the UTC
 * month of `at`, once however often and concurrently it talks. The counter moves only when the
 * month's relationship row was inserted, so repeats and concurrent first calls count once.
 */
export function relationshipActivityStep(
  activity: Activity,
): LendingEntries<NewRelationshipColumns> {
  const definition = sql`relationship_month AS (
      INSERT INTO relationship_months (organization_id, month, end_user_id, personality_id, first_active_at)
      VALUES (${activity.organizationId}, ${monthStartOf(activity.at)}, ${activity.endUserId},
              ${activity.personalityId}, ${activity.at})
      ON CONFLICT DO NOTHING
      RETURNING organization_id, month, end_user_id, personality_id),
    relationship_counter AS (
      INSERT INTO usage_monthly_counters (organization_id, month, active_relationships)
      SELECT organization_id, month, 1 FROM relationship_month
      ON CONFLICT (organization_id, month)
      DO UPDATE SET active_relationships = usage_monthly_counters.active_relationships + 1)`;
  // Rows only for a pair new in the month: billing's meter event step reads them.
  return new LendingEntries(definition, 'relationship_month', [
    'organization_id',
    'month',
    'end_user_id',
    'personality_id',
  ]);
}

/**
 * WITH entries adding a completed reply's token counts (or those of a turn's model calls written
 * before it has a reply) to its organization's month (whose new total, `used_tokens`, it lends:
 * the budget's thresholds read it), to the month of the model that wrote it, and to the rollups
 * the breakdown and the daily budget read: the organization's day, the end user's month, the
 * personality's month, the API key's month and the end user's day (not those two once the end
 * user is erased: TokensUsed.endUserErased). Its text does not depend on the values (a reply
 * without a model inserts no model row), so a named statement can carry it.
 */
export function tokenUsageStep(tokens: TokensUsed): LendingEntries<MonthTokensColumns> {
  const month = monthStartOf(tokens.at);
  const day = utcDay(tokens.at);
  const total = tokens.promptTokens + tokens.completionTokens;
  const counts = sql`${tokens.replies ?? 1}::bigint, ${tokens.promptTokens}::bigint,
                     ${tokens.completionTokens}::bigint, ${tokens.cachedTokens}::bigint`;
  const add = (table: string) =>
    sql`requests = ${raw(table)}.requests + EXCLUDED.requests,
        prompt_tokens = ${raw(table)}.prompt_tokens + EXCLUDED.prompt_tokens,
        completion_tokens = ${raw(table)}.completion_tokens + EXCLUDED.completion_tokens,
        cached_tokens = ${raw(table)}.cached_tokens + EXCLUDED.cached_tokens`;
  const organizationEntries = sql`token_month AS (
      INSERT INTO token_usage_months (organization_id, month, requests, prompt_tokens,
                                      completion_tokens, cached_tokens)
      VALUES (${tokens.organizationId}, ${month}, ${counts})
      ON CONFLICT (organization_id, month) DO UPDATE SET ${add('token_usage_months')}
      RETURNING organization_id, month, prompt_tokens + completion_tokens AS used_tokens),
    token_model_month AS (
      INSERT INTO token_usage_model_months (organization_id, month, model, requests, prompt_tokens,
                                            completion_tokens, cached_tokens)
      SELECT ${tokens.organizationId}::uuid, ${month}::date, model, ${counts}
        FROM (SELECT ${tokens.model}::text AS model) AS reply WHERE model IS NOT NULL
      ON CONFLICT (organization_id, month, model) DO UPDATE SET ${add('token_usage_model_months')}),
    token_day AS (
      INSERT INTO token_usage_days (organization_id, day, requests, prompt_tokens,
                                    completion_tokens, cached_tokens)
      VALUES (${tokens.organizationId}, ${day}, ${counts})
      ON CONFLICT (organization_id, day) DO UPDATE SET ${add('token_usage_days')}),
    token_personality_month AS (
      INSERT INTO token_usage_personality_months (organization_id, month, personality_id,
                                                  requests, prompt_tokens, completion_tokens,
                                                  cached_tokens, total_tokens)
      VALUES (${tokens.organizationId}, ${month}, ${tokens.personalityId}, ${counts}, ${total}::bigint)
      ON CONFLICT (organization_id, month, personality_id) DO UPDATE
        SET ${add('token_usage_personality_months')},
            total_tokens = token_usage_personality_months.total_tokens + EXCLUDED.total_tokens),
    token_api_key_month AS (
      INSERT INTO token_usage_api_key_months (organization_id, month, api_key_id, requests,
                                              prompt_tokens, completion_tokens, cached_tokens,
                                              total_tokens)
      VALUES (${tokens.organizationId}, ${month},
              coalesce(${tokens.apiKeyId}::uuid, ${SIGNED_IN_USERS_KEY_ID}::uuid), ${counts},
              ${total}::bigint)
      ON CONFLICT (organization_id, month, api_key_id) DO UPDATE
        SET ${add('token_usage_api_key_months')},
            total_tokens = token_usage_api_key_months.total_tokens + EXCLUDED.total_tokens)`;
  // Written only while the end user is there (TokensUsed.endUserErased).
  const endUserEntries = sql`,
    token_end_user_month AS (
      INSERT INTO token_usage_end_user_months (organization_id, month, end_user_id, requests,
                                               prompt_tokens, completion_tokens, cached_tokens,
                                               total_tokens)
      VALUES (${tokens.organizationId}, ${month}, ${tokens.endUserId}, ${counts}, ${total}::bigint)
      ON CONFLICT (organization_id, month, end_user_id) DO UPDATE
        SET ${add('token_usage_end_user_months')},
            total_tokens = token_usage_end_user_months.total_tokens + EXCLUDED.total_tokens),
    token_end_user_day AS (
      -- One row per end user: the first reply of a later day starts it again; a reply stored
      -- late for an earlier day (a day boundary during the reply) leaves a newer day alone.
      INSERT INTO end_user_token_days AS d (end_user_id, organization_id, day, tokens)
      VALUES (${tokens.endUserId}, ${tokens.organizationId}, ${day}, ${total}::bigint)
      ON CONFLICT (end_user_id) DO UPDATE
        SET tokens = CASE WHEN d.day = EXCLUDED.day THEN d.tokens + EXCLUDED.tokens
                          WHEN d.day < EXCLUDED.day THEN EXCLUDED.tokens
                          ELSE d.tokens END,
            day = GREATEST(d.day, EXCLUDED.day))`;
  const definition = sql`${organizationEntries}${tokens.endUserErased ? empty : endUserEntries}`;
  return new LendingEntries(definition, 'token_month', ['organization_id', 'month', 'used_tokens']);
}
