import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { LimitQueryDto } from '../../common/pagination/pagination';

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
