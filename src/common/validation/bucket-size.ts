import { ApiProperty } from '@nestjs/swagger';
import { IsInt, IsNumber, IsPositive, Max, Min } from 'class-validator';

/** The largest refill rate a bucket may be given: the bound of RATE_LIMIT_*_RPS. */
export const BUCKET_MAX_RPS = 1_000_000;
/** The largest burst a bucket may be given: the bound of RATE_LIMIT_*_BURST. */
export const BUCKET_MAX_BURST = 10_000_000;

/**
 * A token bucket's size as a client sets it (an end user's bucket, an API key's): `rps` tokens a
 * second refill it up to `burst`. Numbers only (a string is refused, never converted); bounded,
 * so 1e300 or 2^53 answer 400 instead of reaching the limiter's arithmetic.
 */
export class BucketSizeDto {
  @ApiProperty({
    example: 2,
    exclusiveMinimum: true,
    minimum: 0,
    maximum: BUCKET_MAX_RPS,
    description: 'Tokens added per second (a number > 0)',
  })
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @IsPositive()
  @Max(BUCKET_MAX_RPS)
  rps: number;

  @ApiProperty({
    example: 10,
    minimum: 1,
    maximum: BUCKET_MAX_BURST,
    description: 'How many requests the full bucket allows at once (an integer ≥ 1)',
  })
  @IsInt()
  @Min(1)
  @Max(BUCKET_MAX_BURST)
  burst: number;
}
