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

  it('accepts 1..255 printable ASCII characters as an Idempotency-Key (contract §16), or none', () => {
    expect(validIdempotencyKey(undefined)).toBeUndefined();
    expect(validIdempotencyKey('client-retry-1')).toBe('client-retry-1');
    expect(validIdempotencyKey('~'.repeat(255))).toBe('~'.repeat(255));
    expect(validIdempotencyKey('with space')).toBe('with space');
  });

  it.each(['', 'tab\there', 'é', 'x'.repeat(256), ['a', 'b']])(
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
        { field: 'Idempotency-Key', problem: 'must be 1..255 printable ASCII characters' },
      ]);
    },
  );
});
