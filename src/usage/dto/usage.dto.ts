import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, Matches, MaxLength, MinLength } from 'class-validator';
import { LimitQueryDto } from '../../common/pagination/pagination';
import { MONTH_PATTERN as MONTH } from '../../common/validation/dates';

const MONTH_DOC = {
  description: 'A UTC calendar month, YYYY-MM; defaults to the current one',
  example: '2026-11',
  pattern: MONTH.source,
};

export class MonthQueryDto {
  @ApiPropertyOptional(MONTH_DOC)
  @IsOptional()
  @Matches(MONTH, {
    message: 'month must be a month written YYYY-MM (e.g. 2026-11), 1970-01..9999-12',
  })
  month?: string;
}

// Not ListQueryDto: an item id is a personality id and a user_id, longer than its 256 limit.
export class MonthItemsQueryDto extends LimitQueryDto {
  @ApiPropertyOptional(MONTH_DOC)
  @IsOptional()
  @Matches(MONTH, {
    message: 'month must be a month written YYYY-MM (e.g. 2026-11), 1970-01..9999-12',
  })
  month?: string;

  /** The id of the last item of the previous page. */
  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(37 + 4 * 256)
  starting_after?: string;
}

export class ActiveRelationshipsDto {
  @ApiProperty({ example: '2026-11' })
  month: string;

  @ApiProperty({
    example: 42,
    description:
      'Distinct (end user, personality) pairs with at least one /v1/respond call in the month. Pairs of end users erased since stay counted.',
  })
  active_relationships: number;
}

export class ActiveRelationshipItemDto {
  @ApiProperty({
    example: '5b0e4c1e-8a4e-4f5e-9c61-1f0a3d1b2c3d:customer-42',
    description: 'The cursor of this item, for starting_after',
  })
  id: string;

  @ApiProperty({ example: 'customer-42' })
  user_id: string;

  @ApiProperty({ format: 'uuid' })
  personality_id: string;

  @ApiProperty({ description: 'The first /v1/respond call of the pair in the month' })
  first_active_at: string;
}

export class ModelTokenUsageDto {
  @ApiProperty({
    example: 'gpt-4o-mini',
    description:
      'The model the service asked for on the route that wrote the replies (OPENAI_MODEL, a personality’s own model, or a fallback’s)',
  })
  model: string;

  @ApiProperty({ description: 'Replies this model wrote' })
  requests: number;

  @ApiProperty({ description: 'Prompt tokens the provider reported for them' })
  prompt_tokens: number;

  @ApiProperty({ description: 'Completion tokens the provider reported for them' })
  completion_tokens: number;

  @ApiProperty({ description: 'Prompt tokens served from the provider’s prompt cache' })
  cached_tokens: number;
}

export class TokenUsageDto {
  @ApiProperty({ example: '2026-11' })
  month: string;

  @ApiProperty({
    description:
      'Replies the model provider completed (a reply counts once, whatever retries or fallbacks it took)',
  })
  requests: number;

  @ApiProperty({ description: 'Prompt tokens the provider reported' })
  prompt_tokens: number;

  @ApiProperty({ description: 'Completion tokens the provider reported' })
  completion_tokens: number;

  @ApiProperty({
    description:
      'Of the prompt tokens, those the provider served from its prompt cache (`prompt_tokens_details.cached_tokens`; 0 when it reports none)',
  })
  cached_tokens: number;

  @ApiProperty({
    type: [ModelTokenUsageDto],
    description: 'The same counts per model, most replies first',
  })
  by_model: ModelTokenUsageDto[];
}

/** The UTC month containing `at`, as YYYY-MM. */
export function monthOf(at: Date): string {
  return at.toISOString().slice(0, 7);
}

export const BREAKDOWN_GROUPS = ['end_user', 'personality', 'day', 'model', 'api_key'] as const;
export type BreakdownGroup = (typeof BREAKDOWN_GROUPS)[number];

export class BreakdownQueryDto extends LimitQueryDto {
  @ApiPropertyOptional(MONTH_DOC)
  @IsOptional()
  @Matches(MONTH, {
    message: 'month must be a month written YYYY-MM (e.g. 2026-11), 1970-01..9999-12',
  })
  month?: string;

  @ApiProperty({
    enum: BREAKDOWN_GROUPS,
    description:
      '`day`: the month’s days in order; the others most tokens (prompt + completion) first. `api_key`: the key that asked for each reply; replies made with a user’s access token come last, as one item whose `key` is null',
  })
  @IsIn(BREAKDOWN_GROUPS)
  group_by: BreakdownGroup;

  /** The `key` of the last item of the previous page. */
  @ApiPropertyOptional({ example: 'customer-42' })
  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(256)
  starting_after?: string;
}

export class BreakdownItemDto {
  @ApiProperty({
    example: 'customer-42',
    type: String,
    nullable: true,
    description:
      'The user_id (end_user), the personality id (personality), the day YYYY-MM-DD (day), the model (model) or the API key id (api_key; null: the replies made with users’ access tokens, the last item)',
  })
  key: string | null;

  @ApiProperty({ description: 'Replies the model provider completed' })
  requests: number;

  @ApiProperty()
  prompt_tokens: number;

  @ApiProperty()
  completion_tokens: number;

  @ApiProperty({ description: 'Of the prompt tokens, those served from the provider’s cache' })
  cached_tokens: number;
}

export class UsageBreakdownDto {
  @ApiProperty({ example: '2026-11' })
  month: string;

  @ApiProperty({ enum: BREAKDOWN_GROUPS })
  group_by: BreakdownGroup;

  @ApiProperty({ type: [BreakdownItemDto] })
  data: BreakdownItemDto[];

  @ApiProperty({ description: 'Whether items follow this page (ask with starting_after)' })
  has_more: boolean;
}
