import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, IsUUID, MaxLength, MinLength } from 'class-validator';
import { QueryInteger } from '../validation/query-integer';

export const DEFAULT_PAGE_SIZE = 20;

/** `?limit=` of every list; lists whose cursor is not a plain id add their own `starting_after`. */
export class LimitQueryDto {
  /** How many items to return. */
  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: DEFAULT_PAGE_SIZE })
  @IsOptional()
  @QueryInteger(1, 100)
  limit: number = DEFAULT_PAGE_SIZE;
}

/** `?limit=` and `?starting_after=` of every list (Stripe-style cursor paging). */
export class ListQueryDto extends LimitQueryDto {
  /** The id (cursor) of the last item of the previous page. */
  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(256)
  starting_after?: string;
}

export interface Page<T> {
  data: T[];
  has_more: boolean;
}

/** Given up to `limit + 1` rows fetched in order, answers the page and whether more follow. */
export function toPage<Row, Item>(rows: Row[], limit: number, map: (row: Row) => Item): Page<Item> {
  return { data: rows.slice(0, limit).map(map), has_more: rows.length > limit };
}

/** Paging of lists whose items are identified by a UUID: a malformed cursor is a 400, not a query. */
export class IdListQueryDto extends LimitQueryDto {
  /** The id of the last item of the previous page. */
  @ApiPropertyOptional({ format: 'uuid' })
  @IsOptional()
  @IsUUID('all', { message: 'starting_after must be the id of an item of this list' })
  starting_after?: string;
}
