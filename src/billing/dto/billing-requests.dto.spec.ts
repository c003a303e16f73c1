import type { ArgumentMetadata } from '@nestjs/common';
import { AppError } from '../../common/errors/app-error';
import { createValidationPipe } from '../../common/validation/validation.pipe';
import { ListInvoicesQueryDto, validIdempotencyKey } from './billing-requests.dto';

describe('billing request rules', () => {
  const pipe = createValidationPipe();
  const query: ArgumentMetadata = { type: 'query', metatype: ListInvoicesQueryDto };

  it('accepts an invoice id as the cursor and carries the default limit', async () => {
    await expect(pipe.transform({ starting_after: 'in_1PqR2s' }, query)).resolves.toEqual({
      limit: 20,
      starting_after: 'in_1PqR2s',
    });
    await expect(pipe.transform({}, query)).resolves.toEqual({ limit: 20 });
  });

  it('refuses a cursor that is not an invoice id', async () => {
    const error = await pipe
      .transform({ starting_after: 'nonsense' }, query)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('validation_failed');
    expect((error as AppError).details).toEqual([
      { field: 'starting_after', problem: 'must be an invoice id' },
    ]);
  });

  it('accepts 1..200 visible ASCII characters as an Idempotency-Key, or none', () => {
    expect(validIdempotencyKey(undefined)).toBeUndefined();
    expect(validIdempotencyKey('client-retry-1')).toBe('client-retry-1');
    expect(validIdempotencyKey('~'.repeat(200))).toBe('~'.repeat(200));
  });

  it.each(['', 'has space', 'é', 'x'.repeat(201), ['a', 'b']])(
    'refuses the Idempotency-Key %j',
    (value) => {
      let error: unknown;
      try {
        validIdempotencyKey(value);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(AppError);
      expect((error as AppError).code).toBe('validation_failed');
      expect((error as AppError).details).toEqual([
        { field: 'Idempotency-Key', problem: 'must be 1..200 visible ASCII characters' },
      ]);
    },
  );
});
