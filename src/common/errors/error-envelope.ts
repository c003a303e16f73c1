import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

export class FieldProblemDto {
  @ApiProperty({ example: 'user_id' })
  field: string;

  @ApiProperty({ example: 'must be at most 256 characters' })
  problem: string;
}

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

  @ApiPropertyOptional({ type: [FieldProblemDto] })
  details?: FieldProblemDto[];
}

/** The body of every error response. */
export class ErrorEnvelopeDto {
  @ApiProperty({ type: ErrorBodyDto })
  error: ErrorBodyDto;
}
