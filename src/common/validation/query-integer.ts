import { Transform } from 'class-transformer';

/**
 * A query parameter that is a whole number written in decimal digits, as the contract's `limit`:
 * such text becomes its number, anything else (`0x10`, `1e1`, ` 5`, a repeated parameter) stays
 * as it came, for `@IsInt()` to refuse. `@Type(() => Number)` took all of those (found by review).
 */
export function QueryInteger(): PropertyDecorator {
  return Transform(({ value }: { value: unknown }) =>
    typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value,
  );
}
