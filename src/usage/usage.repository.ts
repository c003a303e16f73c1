import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Columns, type RowOf } from '../database/columns';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { type Sql, sql } from '../database/sql';
import type { EndUser } from '../end-users/entities/end-user.entity';
import type { RelationshipMonth } from './entities/relationship-month.entity';
import { SIGNED_IN_USERS_KEY_ID } from './entities/token-usage-api-key-month.entity';
import type { TokenUsageModelMonth } from './entities/token-usage-model-month.entity';
import type { TokenUsageMonth } from './entities/token-usage-month.entity';
import type { UsageMonthlyCounter } from './entities/usage-monthly-counter.entity';

const TOKEN_COUNTS = Columns.rowOf<TokenUsageMonth>()(
  'requests',
  'promptTokens',
  'completionTokens',
  'cachedTokens',
);

export type TokenCountsRow = RowOf<typeof TOKEN_COUNTS>;

/**
 * A breakdown row: its key, as text, and the rollup's counts, `t`'s unless `alias` names another
 * (every rollup has token_usage_months' count columns: bigint, so strings).
 */
function breakdownColumns(key: Sql, alias = 't') {
  return Columns.computed<{ key: string }>({ key }).and(
    Columns.rowOf<TokenUsageMonth>(alias)(
      'requests',
      'promptTokens',
      'completionTokens',
      'cachedTokens',
    ),
  );
}

const BY_END_USER = breakdownColumns(sql`e.user_id`);
const BY_PERSONALITY = breakdownColumns(sql`t.personality_id::text`);
const BY_MODEL = breakdownColumns(sql`t.model`);
/** Of the union of the keys' rows and the signed-in users' row, unqualified. */
const BY_API_KEY = breakdownColumns(sql`key`, '');
const BY_DAY = breakdownColumns(sql`to_char(t.day, 'YYYY-MM-DD')`);

export type BreakdownRow = RowOf<typeof BY_END_USER>;

const MODEL_TOKEN_COUNTS = Columns.rowOf<TokenUsageModelMonth>()(
  'model',
  'requests',
  'promptTokens',
  'completionTokens',
  'cachedTokens',
);

export type ModelTokenCountsRow = RowOf<typeof MODEL_TOKEN_COUNTS>;

const ACTIVE_RELATIONSHIPS = Columns.rowOf<UsageMonthlyCounter>()('activeRelationships');

/** A relationship as the list shows it: the end user by their user_id. */
const RELATIONSHIP_ITEM = Columns.rowOf<EndUser>('e')('userId').and(
  Columns.rowOf<RelationshipMonth>('r')('personalityId', 'firstActiveAt'),
);

export type RelationshipItemRow = RowOf<typeof RELATIONSHIP_ITEM>;

const END_USER_ID = Columns.rowOf<EndUser>()('id');

/**
 * A breakdown's page of one month's rollup, most tokens first (ties: by `id`), after the row
 * `after` names; a cursor naming no row of the month gives an empty page.
 */
function byTokens(
  table: string,
  id: string,
  organizationId: string,
  monthStart: string,
  after: string | null,
): Keyset {
  return {
    table,
    alias: 't',
    sortBy: 'total_tokens',
    id,
    cursor: after ?? undefined,
    scope: { organization_id: organizationId, month: monthStart },
    order: 'desc',
  };
}

/**
 * The reads and erasure of the monthly usage tables (relationship_months,
 * usage_monthly_counters, token_usage_months, token_usage_model_months and the breakdown's
 * rollups); a reply writes them
 * with usage.steps.ts.
 */
@Injectable()
export class UsageRepository {
  constructor(private readonly database: Database) {}

  findTokens(organizationId: string, monthStart: string): Promise<TokenCountsRow | undefined> {
    return this.database.row(
      TOKEN_COUNTS.query`SELECT ${TOKEN_COUNTS} FROM token_usage_months
           WHERE organization_id = ${organizationId} AND month = ${monthStart}`,
      { prepared: true },
    );
  }

  /**
   * The month's end users, most tokens first (ties: by internal id), after the end user whose
   * user_id is `after`: keyset paging down token_usage_end_user_months_total_idx, then the
   * page's user_ids. A cursor naming no row of the list gives an empty page.
   */
  breakdownByEndUser(
    organizationId: string,
    monthStart: string,
    after: string | null,
    limit: number,
  ): Promise<BreakdownRow[]> {
    const page: Keyset = {
      ...byTokens('token_usage_end_user_months', 'end_user_id', organizationId, monthStart, after),
      cursorType: 'text',
      cursorId: sql`(SELECT ce.id FROM end_users ce
                      WHERE ce.organization_id = ${organizationId} AND ce.user_id = ${after})`,
    };
    return this.database.rows(
      BY_END_USER.query`SELECT ${BY_END_USER}
            FROM token_usage_end_user_months t
            JOIN end_users e ON e.id = t.end_user_id
           WHERE t.organization_id = ${organizationId} AND t.month = ${monthStart}
             AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
      { prepared: true },
    );
  }

  /** The month's personalities, most tokens first (ties: by id), after the personality `after`. */
  breakdownByPersonality(
    organizationId: string,
    monthStart: string,
    after: string | null,
    limit: number,
  ): Promise<BreakdownRow[]> {
    const page = byTokens(
      'token_usage_personality_months',
      'personality_id',
      organizationId,
      monthStart,
      after,
    );
    return this.database.rows(
      BY_PERSONALITY.query`SELECT ${BY_PERSONALITY}
            FROM token_usage_personality_months t
           WHERE t.organization_id = ${organizationId} AND t.month = ${monthStart}
             AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
      { prepared: true },
    );
  }

  /** The month's models, most tokens first (ties: by name), after the model `after`. */
  breakdownByModel(
    organizationId: string,
    monthStart: string,
    after: string | null,
    limit: number,
  ): Promise<BreakdownRow[]> {
    const page: Keyset = {
      ...byTokens('token_usage_model_months', 'model', organizationId, monthStart, after),
      // This rollup has no total_tokens column.
      sortBy: (p) => `${p}prompt_tokens + ${p}completion_tokens`,
      cursorType: 'text',
    };
    return this.database.rows(
      BY_MODEL.query`SELECT ${BY_MODEL}
            FROM token_usage_model_months t
           WHERE t.organization_id = ${organizationId} AND t.month = ${monthStart}
             AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
      { prepared: true },
    );
  }

  /**
   * The month's API keys, most tokens first (ties: by id), after the key `after`; then, last
   * whatever its tokens, the row of replies made with users' access tokens (its key is
   * SIGNED_IN_USERS_KEY_ID), so that every page ends on a key a cursor can name.
   */
  breakdownByApiKey(
    organizationId: string,
    monthStart: string,
    after: string | null,
    limit: number,
  ): Promise<BreakdownRow[]> {
    const page = byTokens(
      'token_usage_api_key_months',
      'api_key_id',
      organizationId,
      monthStart,
      after,
    );
    return this.database.rows(
      BY_API_KEY.query`SELECT ${BY_API_KEY} FROM (
            (SELECT t.api_key_id::text AS key, t.requests, t.prompt_tokens, t.completion_tokens,
                    t.cached_tokens, 0 AS part, t.total_tokens, t.api_key_id
               FROM token_usage_api_key_months t
              WHERE t.organization_id = ${organizationId} AND t.month = ${monthStart}
                AND t.api_key_id <> ${SIGNED_IN_USERS_KEY_ID}::uuid
                AND ${keysetAfter(page)}
              ORDER BY ${keysetOrder(page)}
              LIMIT ${limit + 1})
            UNION ALL
            (SELECT t.api_key_id::text, t.requests, t.prompt_tokens, t.completion_tokens,
                    t.cached_tokens, 1, t.total_tokens, t.api_key_id
               FROM token_usage_api_key_months t
              WHERE t.organization_id = ${organizationId} AND t.month = ${monthStart}
                AND t.api_key_id = ${SIGNED_IN_USERS_KEY_ID}::uuid)) rows
           ORDER BY part, total_tokens DESC, api_key_id DESC
           LIMIT ${limit + 1}`,
      { prepared: true },
    );
  }

  /** The month's days in order, after the day `after` (YYYY-MM-DD). */
  breakdownByDay(
    organizationId: string,
    monthStart: string,
    after: string | null,
    limit: number,
  ): Promise<BreakdownRow[]> {
    return this.database.rows(
      BY_DAY.query`SELECT ${BY_DAY}
            FROM token_usage_days t
           WHERE t.organization_id = ${organizationId}
             AND t.day >= ${monthStart}::date AND t.day < ${monthStart}::date + interval '1 month'
             AND (${after}::date IS NULL OR t.day > ${after}::date)
           ORDER BY t.day
           LIMIT ${limit + 1}`,
      { prepared: true },
    );
  }

  /** The month's counts per model, most replies first. */
  findTokensByModel(organizationId: string, monthStart: string): Promise<ModelTokenCountsRow[]> {
    return this.database.rows(
      MODEL_TOKEN_COUNTS.query`SELECT ${MODEL_TOKEN_COUNTS}
            FROM token_usage_model_months
           WHERE organization_id = ${organizationId} AND month = ${monthStart}
           ORDER BY requests DESC, model`,
      { prepared: true },
    );
  }

  async findActiveRelationships(organizationId: string, monthStart: string): Promise<number> {
    const row = await this.database.row(
      ACTIVE_RELATIONSHIPS.query`SELECT ${ACTIVE_RELATIONSHIPS} FROM usage_monthly_counters
           WHERE organization_id = ${organizationId} AND month = ${monthStart}`,
      { prepared: true },
    );
    return Number(row?.active_relationships ?? 0);
  }

  /** Ordered by (personality, end user), `limit + 1` rows, after the pair `after` if given. */
  findItems(
    organizationId: string,
    monthStart: string,
    after: { personalityId: string; endUserId: string } | null,
    limit: number,
  ): Promise<RelationshipItemRow[]> {
    return this.database.rows(
      RELATIONSHIP_ITEM.query`SELECT ${RELATIONSHIP_ITEM}
            FROM relationship_months r
            JOIN end_users e ON e.id = r.end_user_id
           WHERE r.organization_id = ${organizationId} AND r.month = ${monthStart}
             AND (${after?.personalityId ?? null}::uuid IS NULL
                  OR (r.personality_id, r.end_user_id)
                     > (${after?.personalityId ?? null}::uuid, ${after?.endUserId ?? null}::uuid))
           ORDER BY r.personality_id, r.end_user_id
           LIMIT ${limit + 1}`,
    );
  }

  /** The internal id of an end user named by a cursor; the list joins end_users anyway. */
  async findEndUserId(organizationId: string, userId: string): Promise<string | undefined> {
    const row = await this.database.row(
      END_USER_ID.query`SELECT ${END_USER_ID} FROM end_users WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
    );
    return row?.id;
  }

  /** In the erasure's transaction: who talked to whom, when. The counters stay. */
  async deleteRelationshipsOf(manager: EntityManager, endUserIds: string[]): Promise<void> {
    await this.database.count(
      sql`DELETE FROM relationship_months WHERE end_user_id = ANY(${endUserIds}::uuid[])`,
      { manager },
    );
  }
}
