import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import type { Row } from '../database/row';
import { sql } from '../database/sql';
import type { TokenUsageModelMonth } from './entities/token-usage-model-month.entity';
import type { TokenUsageMonth } from './entities/token-usage-month.entity';

export interface RelationshipItemRow {
  user_id: string;
  personality_id: string;
  first_active_at: Date;
}

export type TokenCountsRow = Row<
  TokenUsageMonth,
  'requests' | 'promptTokens' | 'completionTokens' | 'cachedTokens'
>;

export type ModelTokenCountsRow = Row<
  TokenUsageModelMonth,
  'model' | 'requests' | 'promptTokens' | 'completionTokens' | 'cachedTokens'
>;

/**
 * The reads and erasure of the monthly usage tables (relationship_months,
 * usage_monthly_counters, token_usage_months, token_usage_model_months); a reply writes them
 * with usage.steps.ts.
 */
@Injectable()
export class UsageRepository {
  constructor(private readonly database: Database) {}

  findTokens(organizationId: string, monthStart: string): Promise<TokenCountsRow | undefined> {
    return this.database.row<TokenCountsRow>(
      sql`SELECT requests, prompt_tokens, completion_tokens, cached_tokens FROM token_usage_months
           WHERE organization_id = ${organizationId} AND month = ${monthStart}`,
      { name: 'usage_read_tokens' },
    );
  }

  /**
   * What the budgets are checked against: the organization's tokens (prompt + completion) of the
   * month and, when `endUserId` is given, the end user's of the day. One round trip, two primary
   * key probes.
   */
  findSpent(
    organizationId: string,
    monthStart: string,
    endUserId: string | null,
    day: string,
  ): Promise<{ month_tokens: string | null; day_tokens: string | null }> {
    return this.database
      .row<{ month_tokens: string | null; day_tokens: string | null }>(
        sql`SELECT (SELECT prompt_tokens + completion_tokens FROM token_usage_months
                     WHERE organization_id = ${organizationId} AND month = ${monthStart})
                     AS month_tokens,
                   (SELECT tokens FROM end_user_token_days
                     WHERE end_user_id = ${endUserId}::uuid AND day = ${day}::date) AS day_tokens`,
        { name: 'usage_read_spent' },
      )
      .then((row) => row!);
  }

  /** The month's counts per model, most replies first. */
  findTokensByModel(organizationId: string, monthStart: string): Promise<ModelTokenCountsRow[]> {
    return this.database.rows<ModelTokenCountsRow>(
      sql`SELECT model, requests, prompt_tokens, completion_tokens, cached_tokens
            FROM token_usage_model_months
           WHERE organization_id = ${organizationId} AND month = ${monthStart}
           ORDER BY requests DESC, model`,
      { name: 'usage_read_tokens_by_model' },
    );
  }

  async findActiveRelationships(organizationId: string, monthStart: string): Promise<number> {
    const row = await this.database.row<{ active_relationships: string }>(
      sql`SELECT active_relationships FROM usage_monthly_counters
           WHERE organization_id = ${organizationId} AND month = ${monthStart}`,
      { name: 'usage_read_month' },
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
    return this.database.rows<RelationshipItemRow>(
      sql`SELECT e.user_id, r.personality_id, r.first_active_at
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
    const row = await this.database.row<{ id: string }>(
      sql`SELECT id FROM end_users WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
    );
    return row?.id;
  }

  /** In the erasure's transaction: who talked to whom, when. The counters stay. */
  async deleteRelationshipsOf(manager: EntityManager, endUserIds: string[]): Promise<void> {
    await this.database.rows(
      sql`DELETE FROM relationship_months WHERE end_user_id = ANY(${endUserIds}::uuid[])`,
      { manager },
    );
  }
}
