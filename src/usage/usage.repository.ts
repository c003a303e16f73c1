import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import { poolOf, type SqlStep } from '../database/pg-pool';

export interface RelationshipItemRow {
  user_id: string;
  personality_id: string;
  first_active_at: Date;
}

export interface TokenCountsRow {
  requests: string;
  prompt_tokens: string;
  completion_tokens: string;
}

/** `$first`, `$first+1`, … as the placeholders of a step. */
const placeholders = (first: number) => (offset: number) => `$${first + offset}`;

/** The SQL of the monthly usage tables (relationship_months, usage_monthly_counters, tokens). */
@Injectable()
export class UsageRepository {
  private readonly pool: Pool;

  constructor(@InjectDataSource() dataSource: DataSource) {
    this.pool = poolOf(dataSource);
  }

  /**
   * WITH entries inserting the month's relationship row if it is new and counting it: the
   * counter moves only when a row was inserted, so repeats and concurrent first calls count once.
   * Parameters: organization, month (first day), end user id, personality id, first active at.
   */
  recordActivityStep(firstParam: number, values: unknown[]): SqlStep {
    const p = placeholders(firstParam);
    return {
      sql: `relationship_month AS (
        INSERT INTO relationship_months (organization_id, month, end_user_id, personality_id, first_active_at)
        VALUES (${p(0)}, ${p(1)}, ${p(2)}, ${p(3)}, ${p(4)})
        ON CONFLICT DO NOTHING
        RETURNING organization_id, month),
      relationship_counter AS (
        INSERT INTO usage_monthly_counters (organization_id, month, active_relationships)
        SELECT organization_id, month, 1 FROM relationship_month
        ON CONFLICT (organization_id, month)
        DO UPDATE SET active_relationships = usage_monthly_counters.active_relationships + 1)`,
      params: values,
    };
  }

  /**
   * A WITH entry adding a reply's token counts to its organization's month. Parameters:
   * organization, month (first day), prompt tokens, completion tokens.
   */
  recordTokensStep(firstParam: number, values: unknown[]): SqlStep {
    const p = placeholders(firstParam);
    return {
      sql: `token_month AS (
        INSERT INTO token_usage_months (organization_id, month, requests, prompt_tokens, completion_tokens)
        VALUES (${p(0)}, ${p(1)}, 1, ${p(2)}, ${p(3)})
        ON CONFLICT (organization_id, month) DO UPDATE
          SET requests = token_usage_months.requests + 1,
              prompt_tokens = token_usage_months.prompt_tokens + EXCLUDED.prompt_tokens,
              completion_tokens = token_usage_months.completion_tokens + EXCLUDED.completion_tokens)`,
      params: values,
    };
  }

  async findTokens(
    organizationId: string,
    monthStart: string,
  ): Promise<TokenCountsRow | undefined> {
    const { rows } = await this.pool.query<TokenCountsRow>({
      name: 'usage_read_tokens',
      text: `SELECT requests, prompt_tokens, completion_tokens FROM token_usage_months
              WHERE organization_id = $1 AND month = $2`,
      values: [organizationId, monthStart],
    });
    return rows[0];
  }

  async findActiveRelationships(organizationId: string, monthStart: string): Promise<number> {
    const { rows } = await this.pool.query<{ active_relationships: string }>({
      name: 'usage_read_month',
      text: `SELECT active_relationships FROM usage_monthly_counters
              WHERE organization_id = $1 AND month = $2`,
      values: [organizationId, monthStart],
    });
    return Number(rows[0]?.active_relationships ?? 0);
  }

  /** Ordered by (personality, end user), `limit + 1` rows, after the pair `after` if given. */
  async findItems(
    organizationId: string,
    monthStart: string,
    after: { personalityId: string; endUserId: string } | null,
    limit: number,
  ): Promise<RelationshipItemRow[]> {
    const { rows } = await this.pool.query<RelationshipItemRow>(
      `SELECT e.user_id, r.personality_id, r.first_active_at
         FROM relationship_months r
         JOIN end_users e ON e.id = r.end_user_id
        WHERE r.organization_id = $1 AND r.month = $2
          AND ($3::uuid IS NULL OR (r.personality_id, r.end_user_id) > ($3::uuid, $4::uuid))
        ORDER BY r.personality_id, r.end_user_id
        LIMIT $5`,
      [
        organizationId,
        monthStart,
        after?.personalityId ?? null,
        after?.endUserId ?? null,
        limit + 1,
      ],
    );
    return rows;
  }

  /** The internal id of an end user named by a cursor; the list joins end_users anyway. */
  async findEndUserId(organizationId: string, userId: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ id: string }>(
      'SELECT id FROM end_users WHERE organization_id = $1 AND user_id = $2',
      [organizationId, userId],
    );
    return rows[0]?.id;
  }

  /** In the erasure's transaction: who talked to whom, when. The counters stay. */
  async deleteRelationshipsOf(manager: EntityManager, endUserIds: string[]): Promise<void> {
    await manager.query('DELETE FROM relationship_months WHERE end_user_id = ANY($1::uuid[])', [
      endUserIds,
    ]);
  }
}
