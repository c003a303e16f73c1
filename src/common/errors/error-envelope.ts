import { ApiExtraModels, ApiProperty, ApiPropertyOptional, getSchemaPath } from '@nestjs/swagger';

export class FieldProblemDto {
  @ApiProperty({ example: 'user_id' })
  field: string;

  @ApiProperty({ example: 'must be at most 256 characters' })
  problem: string;
}

/** The `details` of a 402 `budget_exceeded`: which budget refused, and when it resets. */
export class BudgetExceededDetailsDto {
  @ApiProperty({ enum: ['organization', 'end_user'] })
  scope: 'organization' | 'end_user';

  @ApiProperty({ example: 1000000, description: 'The budget in tokens' })
  limit: number;

  @ApiProperty({
    example: 1000412,
    description: 'Tokens spent in the period, plus those reserved by replies still in flight',
  })
  used: number;

  @ApiProperty({
    example: '2026-12-01T00:00:00.000Z',
    description: 'The first instant of the next UTC month (organization) or day (end user)',
  })
  resets_at: string;
}

@ApiExtraModels(FieldProblemDto, BudgetExceededDetailsDto)
export class ErrorBodyDto {
  @ApiProperty({ example: 404 })
  status: number;

  @ApiProperty({
    example: 'not_found',
    description: 'Stable snake_case code; see the API contract §4',
  })
  code: string;

  @ApiProperty({ example: 'End user not found' })
  message: string;

  @ApiProperty({
    example: '01JD2Z6Q7X9V4T8K3M5N1P0R2S',
    description: 'Same value as the X-Request-Id header',
  })
  request_id: string;

  @ApiPropertyOptional({
    description:
      'A 400 lists its field problems; a 402 `budget_exceeded` has one object naming the budget',
    oneOf: [
      { type: 'array', items: { $ref: getSchemaPath(FieldProblemDto) } },
      { $ref: getSchemaPath(BudgetExceededDetailsDto) },
    ],
  })
  details?: FieldProblemDto[] | BudgetExceededDetailsDto;

  @ApiPropertyOptional({
    format: 'date-time',
    example: '2026-12-05T19:40:00.000Z',
    description: 'A 409 `end_user_under_deletion`: when the erasure is expected to be done',
  })
  erasure_expected_at?: string;
}

/** The body of every error response. */
export class ErrorEnvelopeDto {
  @ApiProperty({ type: ErrorBodyDto })
  error: ErrorBodyDto;
}
