import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsInt, IsObject, Max, Min, ValidateIf, ValidateNested } from 'class-validator';
import { BucketSizeDto } from '../../common/validation/bucket-size';

/**
 * The largest budget: 2^53 − 1 tokens, the largest integer a JSON client (and the service's own
 * arithmetic) holds exactly. More is absurd (and is refused, 400) rather than rounded.
 */
export const MAX_TOKEN_BUDGET = Number.MAX_SAFE_INTEGER;

const BUDGET_DOC = {
  type: Number,
  nullable: true,
  minimum: 1,
  maximum: MAX_TOKEN_BUDGET,
};

/** An organization's limits (contract §23); each null is "no limit", the default. */
export class LimitsDto {
  @ApiProperty({
    ...BUDGET_DOC,
    example: 5_000_000,
    description:
      'Provider tokens (prompt + completion) the organization may spend in a UTC month; over it /v1/respond answers 402 `budget_exceeded`',
  })
  monthly_token_budget: number | null;

  @ApiProperty({
    ...BUDGET_DOC,
    example: 50_000,
    description: 'Provider tokens each end user may spend in a UTC day (402 past it)',
  })
  end_user_daily_token_budget: number | null;

  @ApiProperty({
    type: BucketSizeDto,
    nullable: true,
    description:
      'A token bucket per end user (user_id) on /v1/respond, besides the organization’s (429 `rate_limited` when empty)',
  })
  end_user_rate_limit: BucketSizeDto | null;
}

/** A PATCH: the fields given change; null removes a limit. */
export class UpdateLimitsDto {
  @ApiPropertyOptional({ ...BUDGET_DOC, example: 5_000_000 })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined && value !== null)
  @IsInt()
  @Min(1)
  @Max(MAX_TOKEN_BUDGET)
  monthly_token_budget?: number | null;

  @ApiPropertyOptional({ ...BUDGET_DOC, example: 50_000 })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined && value !== null)
  @IsInt()
  @Min(1)
  @Max(MAX_TOKEN_BUDGET)
  end_user_daily_token_budget?: number | null;

  @ApiPropertyOptional({ type: BucketSizeDto, nullable: true })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined && value !== null)
  @IsObject()
  @ValidateNested()
  @Type(() => BucketSizeDto)
  end_user_rate_limit?: BucketSizeDto | null;
}
