import { applyDecorators } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { ValidateBy } from 'class-validator';

/**
 * A query parameter that is a whole number from `min` to `max` written in decimal digits, as the
 * contract's `limit`: such text becomes its number; anything else (`0x10`, `1e1`, ` 5`, `1.5`, a
 * repeated parameter) is refused with one problem naming the range. `@Type(() => Number)` took
 * all of those (found by review), and IsInt, Min and Max refused `1.5` three times over, "not
 * greater than 50" and "not less than 1" at once (found by another).
 */
export function QueryInteger(min: number, max: number): PropertyDecorator {
  return applyDecorators(
    Transform(({ value }: { value: unknown }) =>
      typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value,
    ),
    ValidateBy({
      name: 'queryInteger',
      validator: {
        validate: (value) =>
          typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max,
        defaultMessage: () => `$property must be a whole number from ${min} to ${max}`,
      },
    }),
  );
}
