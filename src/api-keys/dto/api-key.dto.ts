import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsIn,
  IsInt,
  IsObject,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { BucketSizeDto } from '../../common/validation/bucket-size';
import { SCOPES, type Scope } from '../../common/auth/caller';
import { IsTimestamp } from '../../common/validation/dates';
import { NoControlCharacters } from '../../common/validation/no-control-characters';
import { HasVisibleText } from '../../common/validation/visible-text';
import type { ApiKey } from '../entities/api-key.entity';

export class CreateApiKeyDto {
  @ApiProperty({ example: 'production backend', minLength: 1, maxLength: 200 })
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  @NoControlCharacters()
  @HasVisibleText()
  name: string;

  @ApiProperty({ enum: SCOPES, isArray: true, example: ['read_write'] })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(3)
  @ArrayUnique()
  @IsIn(SCOPES, { each: true })
  scopes: Scope[];

  /**
   * When the key stops working (ISO 8601, in the future). A key made with an API key ends no
   * later than that key: the response's `expires_at` is the one that holds.
   */
  @ApiPropertyOptional({ example: '2027-01-01T00:00:00.000Z' })
  @IsOptional()
  @IsTimestamp()
  expires_at?: string;

  @ApiPropertyOptional({
    type: BucketSizeDto,
    nullable: true,
    description:
      'A token bucket of the key’s own, drawn from besides the organization’s (429 `rate_limited` when empty); null or absent: none',
  })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined && value !== null)
  @IsObject()
  @ValidateNested()
  @Type(() => BucketSizeDto)
  rate_limit?: BucketSizeDto | null;
}

/** A PATCH: the fields given change; `rate_limit: null` removes the key's own bucket. */
export class UpdateApiKeyDto {
  @ApiPropertyOptional({ example: 'partner integration', minLength: 1, maxLength: 200 })
  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  @NoControlCharacters()
  @HasVisibleText()
  name?: string;

  @ApiPropertyOptional({ type: BucketSizeDto, nullable: true })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined && value !== null)
  @IsObject()
  @ValidateNested()
  @Type(() => BucketSizeDto)
  rate_limit?: BucketSizeDto | null;
}

export const DEFAULT_ROLL_OVERLAP_SECONDS = 86_400;

export class RollApiKeyDto {
  /** How long the old key keeps working (0: it stops at once). */
  @ApiPropertyOptional({ minimum: 0, maximum: 30 * 86_400, default: DEFAULT_ROLL_OVERLAP_SECONDS })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(30 * 86_400)
  expires_in_seconds?: number;
}

export class ApiKeyCreatorDto {
  @ApiProperty({ enum: ['user', 'api_key'] })
  type: 'user' | 'api_key';

  @ApiProperty({ format: 'uuid', description: "The user's id, or the API key's" })
  id: string;
}

export class ApiKeyDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty()
  name: string;

  @ApiProperty({ enum: SCOPES, isArray: true })
  scopes: string[];

  @ApiProperty({ example: 'pk_3fGh8kLm', description: 'The first characters of the key' })
  prefix: string;

  @ApiProperty({ example: 'x9Qz', description: 'The last four characters of the key' })
  last_four: string;

  @ApiProperty()
  created_at: string;

  @ApiProperty({ nullable: true, type: String })
  expires_at: string | null;

  @ApiProperty({ nullable: true, type: String, description: 'Updated at most once a minute' })
  last_used_at: string | null;

  @ApiProperty({
    type: BucketSizeDto,
    nullable: true,
    description: 'The key’s own bucket besides the organization’s; null: none',
  })
  rate_limit: BucketSizeDto | null;

  @ApiProperty({
    type: ApiKeyCreatorDto,
    nullable: true,
    description:
      'Who made the key: a user (their access token) or an API key. Removing the member revokes the keys they made (and the keys those made) unless `?keep_api_keys=true`; null for a key made by a key before this was recorded',
  })
  created_by: ApiKeyCreatorDto | null;
}

export class CreatedApiKeyDto extends ApiKeyDto {
  @ApiProperty({
    nullable: true,
    type: String,
    description:
      'The full key. It is shown in this response only and cannot be retrieved again: `null` in the replay of an Idempotency-Key',
  })
  key: string;
}

export function toApiKeyResponse(
  key: Pick<
    ApiKey,
    | 'id'
    | 'name'
    | 'scopes'
    | 'prefix'
    | 'lastFour'
    | 'createdAt'
    | 'expiresAt'
    | 'lastUsedAt'
    | 'rateLimitRps'
    | 'rateLimitBurst'
    | 'createdByUserId'
    | 'createdByApiKeyId'
  >,
): ApiKeyDto {
  return {
    id: key.id,
    name: key.name,
    scopes: key.scopes,
    prefix: key.prefix,
    last_four: key.lastFour,
    created_at: key.createdAt.toISOString(),
    expires_at: key.expiresAt?.toISOString() ?? null,
    last_used_at: key.lastUsedAt?.toISOString() ?? null,
    rate_limit:
      key.rateLimitRps === null || key.rateLimitBurst === null
        ? null
        : { rps: key.rateLimitRps, burst: key.rateLimitBurst },
    created_by: key.createdByUserId
      ? { type: 'user', id: key.createdByUserId }
      : key.createdByApiKeyId
        ? { type: 'api_key', id: key.createdByApiKeyId }
        : null,
  };
}
