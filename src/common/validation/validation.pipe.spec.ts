import { ArgumentMetadata } from '@nestjs/common';
import { Type } from 'class-transformer';
import { IsInt, IsOptional, IsString, ValidateNested } from 'class-validator';
import { AppError } from '../errors/app-error';
import { createValidationPipe } from './validation.pipe';

class Inner {
  @IsInt()
  size: number;
}

class Outer {
  @IsString()
  name: string;

  @ValidateNested()
  @Type(() => Inner)
  inner: Inner;
}

const metadata: ArgumentMetadata = { type: 'body', metatype: Outer };

describe('validation pipe', () => {
  const pipe = createValidationPipe();

  it('lists every problem with dotted field paths, unknown fields included', async () => {
    const error = await pipe
      .transform({ name: 3, inner: { size: 'big' }, extra: true }, metadata)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('validation_failed');
    expect((error as AppError).details).toEqual(
      expect.arrayContaining([
        { field: 'extra', problem: 'is not a known field' },
        { field: 'name', problem: 'name must be a string' },
        { field: 'inner.size', problem: 'size must be an integer number' },
      ]),
    );
  });

  it('returns an instance of the DTO for a valid body', async () => {
    const value = await pipe.transform({ name: 'a', inner: { size: 2 } }, metadata);
    expect(value).toBeInstanceOf(Outer);
    expect((value as Outer).inner).toBeInstanceOf(Inner);
  });

  it('answers an empty input the same way every time, through the cached fast path', async () => {
    class OptionalOnly {
      @IsOptional()
      @IsInt()
      limit?: number;
    }
    const query: ArgumentMetadata = { type: 'query', metatype: OptionalOnly };
    for (let i = 0; i < 3; i++) {
      await expect(pipe.transform({}, query)).resolves.toBeInstanceOf(OptionalOnly);
      await expect(pipe.transform({}, metadata)).rejects.toBeInstanceOf(AppError);
    }
    await expect(pipe.transform({ limit: 'x' }, query)).rejects.toBeInstanceOf(AppError);
  });
});
