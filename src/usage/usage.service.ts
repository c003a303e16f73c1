import { Injectable } from '@nestjs/common';
import { isUUID } from 'class-validator';
import type { EntityManager } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import { Clock } from '../common/time/clock';
import {
  ActiveRelationshipItemDto,
  ActiveRelationshipsDto,
  type BreakdownGroup,
  monthOf,
  TokenUsageDto,
  UsageBreakdownDto,
} from './dto/usage.dto';
import { SIGNED_IN_USERS_KEY_ID } from './entities/token-usage-api-key-month.entity';
import { UsageRepository } from './usage.repository';
import {
  type ErasedEndUser,
  ErasesEndUsers,
  ErasureOrder,
} from '../common/erasure/erasure-participant';

/** A real day (YYYY-MM-DD) of the month `month` (YYYY-MM). */
function isDayOf(day: string, month: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || !day.startsWith(`${month}-`)) return false;
  const date = new Date(`${day}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === day;
}

/** Monthly active relationships: recorded by /v1/respond, read in O(1) for billing. */
@Injectable()
export class UsageService {
  constructor(
    private readonly usage: UsageRepository,
    private readonly clock: Clock,
  ) {}

  /** The month asked for, or the current UTC month. */
  async tokens(organizationId: string, month = this.currentMonth()): Promise<TokenUsageDto> {
    const [row, byModel] = await Promise.all([
      this.usage.findTokens(organizationId, `${month}-01`),
      this.usage.findTokensByModel(organizationId, `${month}-01`),
    ]);
    return {
      month,
      requests: Number(row?.requests ?? 0),
      prompt_tokens: Number(row?.prompt_tokens ?? 0),
      completion_tokens: Number(row?.completion_tokens ?? 0),
      cached_tokens: Number(row?.cached_tokens ?? 0),
      by_model: byModel.map((model) => ({
        model: model.model,
        requests: Number(model.requests),
        prompt_tokens: Number(model.prompt_tokens),
        completion_tokens: Number(model.completion_tokens),
        cached_tokens: Number(model.cached_tokens),
      })),
    };
  }

  /**
   * The month's tokens by end user, personality, day, model or API key, from the rollups each reply's
   * statement keeps (no scan of memories); `startingAfter` is the last key of the page before.
   */
  async breakdown(
    organizationId: string,
    options: { month?: string; groupBy: BreakdownGroup; limit: number; startingAfter?: string },
  ): Promise<UsageBreakdownDto> {
    const month = options.month ?? this.currentMonth();
    const monthStart = `${month}-01`;
    const after = options.startingAfter ?? null;
    const { groupBy, limit } = options;
    const invalidCursor = (problem: string) =>
      AppError.validation([{ field: 'starting_after', problem }]);
    let rows;
    switch (groupBy) {
      case 'end_user':
        rows = await this.usage.breakdownByEndUser(organizationId, monthStart, after, limit);
        break;
      case 'personality':
        if (after !== null && !isUUID(after)) throw invalidCursor('must be a personality id');
        rows = await this.usage.breakdownByPersonality(organizationId, monthStart, after, limit);
        break;
      case 'model':
        rows = await this.usage.breakdownByModel(organizationId, monthStart, after, limit);
        break;
      case 'api_key':
        if (after !== null && !isUUID(after)) throw invalidCursor('must be an API key id');
        rows = await this.usage.breakdownByApiKey(organizationId, monthStart, after, limit);
        break;
      case 'day':
        if (after !== null && !isDayOf(after, month)) {
          throw invalidCursor(`must be a day of ${month}, YYYY-MM-DD`);
        }
        rows = await this.usage.breakdownByDay(organizationId, monthStart, after, limit);
        break;
    }
    const page = toPage(rows, limit, (row) => ({
      key: row.key === SIGNED_IN_USERS_KEY_ID ? null : row.key,
      requests: Number(row.requests),
      prompt_tokens: Number(row.prompt_tokens),
      completion_tokens: Number(row.completion_tokens),
      cached_tokens: Number(row.cached_tokens),
    }));
    return { month, group_by: groupBy, ...page };
  }

  /**
   * Erasure removes the personal rows (who talked to whom, when) but keeps the monthly counter:
   * the relationship was active and billed, and the counter holds nothing about the person.
   */
  @ErasesEndUsers({
    order: ErasureOrder.DATA,
    tables: ['relationship_months'],
    // The end user's token rollups; the organization's totals stay.
    cascades: ['token_usage_end_user_months', 'end_user_token_days'],
  })
  eraseEndUsers(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    return this.usage.deleteRelationshipsOf(
      manager,
      endUsers.map((endUser) => endUser.id),
    );
  }

  /** The month asked for, or the current UTC month. */
  async activeRelationships(
    organizationId: string,
    month = this.currentMonth(),
  ): Promise<ActiveRelationshipsDto> {
    const count = await this.usage.findActiveRelationships(organizationId, `${month}-01`);
    return { month, active_relationships: count };
  }

  /** The counted pairs still on record, ordered by (personality, end user); the cursor is the item id. */
  async items(
    organizationId: string,
    options: { month?: string; limit: number; startingAfter?: string },
  ): Promise<Page<ActiveRelationshipItemDto>> {
    const month = options.month ?? this.currentMonth();
    const after = options.startingAfter
      ? await this.resolveCursor(organizationId, options.startingAfter)
      : null;
    const rows = await this.usage.findItems(organizationId, `${month}-01`, after, options.limit);
    return toPage(rows, options.limit, (row) => ({
      id: `${row.personality_id}:${row.user_id}`,
      user_id: row.user_id,
      personality_id: row.personality_id,
      first_active_at: row.first_active_at.toISOString(),
    }));
  }

  /** The UTC month (YYYY-MM) of the clock's now. */
  currentMonth(): string {
    return monthOf(this.clock.now());
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
    const endUserId = await this.usage.findEndUserId(organizationId, userId);
    if (!endUserId) throw invalid;
    return { personalityId, endUserId };
  }
}
