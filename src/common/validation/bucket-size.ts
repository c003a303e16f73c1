import { ApiProperty } from '@nestjs/swagger';
import { IsInt, IsNumber, IsPositive, Max, Min, ValidateBy } from 'class-validator';

/** The largest refill rate a bucket may be given: the bound of RATE_LIMIT_*_RPS. */
export const BUCKET_MAX_RPS = 1_000_000;
/** The largest burst a bucket may be given: the bound of RATE_LIMIT_*_BURST. */
export const BUCKET_MAX_BURST = 10_000_000;
/**
 * The longest a client's bucket may take to refill from empty (`burst / rps`), in seconds. The
 * shared store keeps a bucket until it would be full, one per end user: a bucket refilled over
 * decades, on a new `user_id` each request, would fill Redis with keys that never expire.
 */
export const BUCKET_MAX_REFILL_SECONDS = 3_600;

/** `rps` refills the object's `burst` within BUCKET_MAX_REFILL_SECONDS. */
const RefillsWithinTheHour = () =>
  ValidateBy({
    name: 'refillsWithinTheHour',
    validator: {
      validate: (rps, args) => {
        const { burst } = (args?.object ?? {}) as { burst?: unknown };
        // A burst that is not a number is refused by its own rules.
        return (
          typeof rps !== 'number' ||
          typeof burst !== 'number' ||
          burst / rps <= BUCKET_MAX_REFILL_SECONDS
        );
      },
      defaultMessage: () =>
        `$property must refill the burst within ${BUCKET_MAX_REFILL_SECONDS} seconds (burst / rps ≤ ${BUCKET_MAX_REFILL_SECONDS})`,
    },
  });

/**
 * A token bucket's size as a client sets it (an end user's bucket, an API key's): `rps` tokens a
 * second refill it up to `burst`. Numbers only (a string is refused, never converted); bounded,
 * so 1e300 or 2^53 answer 400 instead of reaching the limiter's arithmetic, and refilled within
 * the hour.
 */
export class BucketSizeDto {
  @ApiProperty({
    example: 2,
    exclusiveMinimum: true,
    minimum: 0,
    maximum: BUCKET_MAX_RPS,
    description: `Tokens added per second (a number > 0); the burst must refill within ${BUCKET_MAX_REFILL_SECONDS} seconds (burst / rps ≤ ${BUCKET_MAX_REFILL_SECONDS})`,
  })
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @IsPositive()
  @Max(BUCKET_MAX_RPS)
  @RefillsWithinTheHour()
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
