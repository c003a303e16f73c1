import type { ArgumentMetadata } from '@nestjs/common';
import { AppError } from '../../common/errors/app-error';
import { createValidationPipe } from '../../common/validation/validation.pipe';
import { ListInvoicesQueryDto } from './billing-requests.dto';

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
});
