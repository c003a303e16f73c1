import { applyDecorators } from '@nestjs/common';
import { IsDateString, ValidateBy } from 'class-validator';

// Years the API accepts in dates and months (API contract §14): PostgreSQL and JavaScript both
// handle them, and nothing this service stores predates 1970.
const MIN_YEAR = 1970;
const MAX_YEAR = 9999;

/** YYYY-MM from 1970-01 to 9999-12. */
export const MONTH_PATTERN = /^(19[7-9]\d|[2-9]\d{3})-(0[1-9]|1[0-2])$/;

export function isYearInRange(date: Date): boolean {
  const year = date.getUTCFullYear();
  return year >= MIN_YEAR && year <= MAX_YEAR;
}

/** A strict ISO 8601 timestamp whose UTC year lies in 1970..9999. */
export const IsTimestamp = () =>
  applyDecorators(
    IsDateString({ strict: true }),
    ValidateBy({
      name: 'yearInRange',
      validator: {
        validate: (value) => typeof value === 'string' && isYearInRange(new Date(value)),
        defaultMessage: () => `$property must lie in the years ${MIN_YEAR}..${MAX_YEAR}`,
      },
    }),
  );
