import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { isUUID } from 'class-validator';
import type { Pool, PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import { poolOf } from '../database/pg-pool';
import {
  ActiveRelationshipItemDto,
  ActiveRelationshipsDto,
  monthOf,
  TokenUsageDto,
} from './dto/usage.dto';

export interface Activity {
  organizationId: string;
  endUserId: string;
  personalityId: string;
  at: Date;
}

export interface TokensUsed {
  organizationId: string;
  at: Date;
  promptTokens: number;
  completionTokens: number;
}

/**
 * Inserts the month's relationship row if it is new and, in the same statement, counts it: the
 * counter moves only when a row was inserted, so repeats and concurrent first calls count once.
 */
const RECORD_ACTIVITY = {
  name: 'usage_record_activity',
  text: `WITH inserted AS (
           INSERT INTO relationship_months (organization_id, month, end_user_id, personality_id, first_active_at)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT DO NOTHING
           RETURNING organization_id, month)
         INSERT INTO usage_monthly_counters (organization_id, month, active_relationships)
         SELECT organization_id, month, 1 FROM inserted
         ON CONFLICT (organization_id, month)
         DO UPDATE SET active_relationships = usage_monthly_counters.active_relationships + 1`,
};

/** Monthly active relationships: recorded by /v1/respond, read in O(1) for billing. */
@Injectable()
export class UsageService {
  private readonly pool: Pool;

  constructor(@InjectDataSource() dataSource: DataSource) {
    this.pool = poolOf(dataSource);
  }

  /** Records the pair as active in the UTC month of `at`, in the caller's transaction. */
  async recordActivity(client: PoolClient, activity: Activity): Promise<void> {
    await client.query({
      ...RECORD_ACTIVITY,
      values: [
        activity.organizationId,
        `${monthOf(activity.at)}-01`,
        activity.endUserId,
        activity.personalityId,
        activity.at,
      ],
    });
  }

  /** Adds a completed reply's token counts to its organization's month, in the caller's transaction. */
  async recordTokens(client: PoolClient, tokens: TokensUsed): Promise<void> {
    await client.query({
      name: 'usage_record_tokens',
      text: `INSERT INTO token_usage_months (organization_id, month, requests, prompt_tokens, completion_tokens)
             VALUES ($1, $2, 1, $3, $4)
             ON CONFLICT (organization_id, month) DO UPDATE
               SET requests = token_usage_months.requests + 1,
                   prompt_tokens = token_usage_months.prompt_tokens + EXCLUDED.prompt_tokens,
                   completion_tokens = token_usage_months.completion_tokens + EXCLUDED.completion_tokens`,
      values: [
        tokens.organizationId,
        `${monthOf(tokens.at)}-01`,
        tokens.promptTokens,
        tokens.completionTokens,
      ],
    });
  }

  async tokens(organizationId: string, month: string): Promise<TokenUsageDto> {
    const { rows } = await this.pool.query<{
      requests: string;
      prompt_tokens: string;
      completion_tokens: string;
    }>({
      name: 'usage_read_tokens',
      text: `SELECT requests, prompt_tokens, completion_tokens FROM token_usage_months
              WHERE organization_id = $1 AND month = $2`,
      values: [organizationId, `${month}-01`],
    });
    return {
      month,
      requests: Number(rows[0]?.requests ?? 0),
      prompt_tokens: Number(rows[0]?.prompt_tokens ?? 0),
      completion_tokens: Number(rows[0]?.completion_tokens ?? 0),
    };
  }

  /**
   * Erasure removes the personal rows (who talked to whom, when) but keeps the monthly counter:
   * the relationship was active and billed, and the counter holds nothing about the person.
   */
  async eraseEndUsers(client: PoolClient, endUserIds: string[]): Promise<void> {
    await client.query('DELETE FROM relationship_months WHERE end_user_id = ANY($1::uuid[])', [
      endUserIds,
    ]);
  }

  async activeRelationships(
    organizationId: string,
    month: string,
  ): Promise<ActiveRelationshipsDto> {
    const { rows } = await this.pool.query<{ active_relationships: string }>({
      name: 'usage_read_month',
      text: `SELECT active_relationships FROM usage_monthly_counters
              WHERE organization_id = $1 AND month = $2`,
      values: [organizationId, `${month}-01`],
    });
    return { month, active_relationships: Number(rows[0]?.active_relationships ?? 0) };
  }

  /** The counted pairs still on record, ordered by (personality, end user); the cursor is the item id. */
  async items(
    organizationId: string,
    month: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<ActiveRelationshipItemDto>> {
    const after = startingAfter ? await this.resolveCursor(organizationId, startingAfter) : null;
    const { rows } = await this.pool.query<{
      user_id: string;
      personality_id: string;
      first_active_at: Date;
    }>(
      `SELECT e.user_id, r.personality_id, r.first_active_at
         FROM relationship_months r
         JOIN end_users e ON e.id = r.end_user_id
        WHERE r.organization_id = $1 AND r.month = $2
          AND ($3::uuid IS NULL OR (r.personality_id, r.end_user_id) > ($3::uuid, $4::uuid))
        ORDER BY r.personality_id, r.end_user_id
        LIMIT $5`,
      [
        organizationId,
        `${month}-01`,
        after?.personalityId ?? null,
        after?.endUserId ?? null,
        limit + 1,
      ],
    );
    return toPage(rows, limit, (row) => ({
      id: `${row.personality_id}:${row.user_id}`,
      user_id: row.user_id,
      personality_id: row.personality_id,
      first_active_at: row.first_active_at.toISOString(),
    }));
  }

  currentMonth(): string {
    return monthOf(new Date());
  }

  private async resolveCursor(
    organizationId: string,
    cursor: string,
  ): Promise<{ personalityId: string; endUserId: string }> {
    const personalityId = cursor.slice(0, 36);
    const userId = cursor.slice(37);
    const invalid = AppError.validation([
      { field: 'starting_after', problem: 'must be the id of an item of this list' },
    ]);
    if (!isUUID(personalityId) || cursor[36] !== ':' || userId.length === 0) throw invalid;
    const { rows } = await this.pool.query<{ id: string }>(
      'SELECT id FROM end_users WHERE organization_id = $1 AND user_id = $2',
      [organizationId, userId],
    );
    if (!rows[0]) throw invalid;
    return { personalityId, endUserId: rows[0].id };
  }
}
