import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { plainToInstance } from 'class-transformer';
import { IsOptional, IsString, Matches, MaxLength, validateSync } from 'class-validator';
import type { Request } from 'express';
import { AppError } from '../../common/errors/app-error';
import { LimitQueryDto } from '../../common/pagination/pagination';
import { toFieldProblems } from '../../common/validation/validation.pipe';

export class CreateSubscriptionDto {
  /** The Stripe price to subscribe to. */
  @ApiProperty({ example: 'price_1PqR2sT3uV4wX5yZ' })
  @IsString()
  @MaxLength(255)
  @Matches(/^price_[A-Za-z0-9]+$/, { message: 'price_id must be a Stripe price id (price_…)' })
  price_id: string;
}

/** Invoices are paged by Stripe's cursor, an invoice id, passed through to Stripe. */
export class ListInvoicesQueryDto extends LimitQueryDto {
  /** The id of the last invoice of the previous page. */
  @ApiPropertyOptional({ example: 'in_1PqR2sT3uV4wX5yZ' })
  @IsOptional()
  @MaxLength(256)
  @Matches(/^in_[A-Za-z0-9]+$/, { message: 'must be an invoice id' })
  starting_after?: string;
}

/** The headers of a request that may be retried; the field is named as the client sends it. */
export class IdempotencyKeyHeaderDto {
  @IsOptional()
  // Contract §16's rule for every POST; Stripe gets a digest of it (BillingService), never the key.
  @Matches(/^[\x20-\x7e]{1,255}$/, { message: 'must be 1..255 printable ASCII characters' })
  'Idempotency-Key'?: string;
}

/** The value of an `Idempotency-Key` header once IdempotencyKeyHeaderDto accepts it. */
export function validIdempotencyKey(value: string | string[] | undefined): string | undefined {
  const headers = plainToInstance(IdempotencyKeyHeaderDto, { 'Idempotency-Key': value });
  const errors = validateSync(headers, { validationError: { target: false, value: false } });
  if (errors.length > 0) throw AppError.validation(toFieldProblems(errors));
  return headers['Idempotency-Key'];
}

/**
 * The request's `Idempotency-Key` header, validated like a body: an invalid one answers 400
 * `validation_failed`. (The global pipe leaves headers alone: Nest treats them as a custom
 * parameter.)
 */
export const IdempotencyKey = createParamDecorator(
  (_data: unknown, context: ExecutionContext): string | undefined =>
    validIdempotencyKey(context.switchToHttp().getRequest<Request>().headers['idempotency-key']),
);
