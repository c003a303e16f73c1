import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsDefined, IsOptional } from 'class-validator';
import { LimitQueryDto } from '../../common/pagination/pagination';
import type { EndUserRow } from '../end-users.repository';
import type { EndUserStatus } from '../entities/end-user.entity';
import {
  IsMetadata,
  IsNewUserId,
  IsUserId,
  METADATA_MAX_BYTES,
  USER_ID_MAX_CHARACTERS,
} from './user-id';

const METADATA_DOC = {
  type: 'object',
  additionalProperties: true,
  description: `Any JSON object, at most ${METADATA_MAX_BYTES} bytes serialized`,
  example: { plan: 'pro', locale: 'en-GB' },
} as const;

export class CreateEndUserDto {
  @ApiProperty({
    minLength: 1,
    maxLength: USER_ID_MAX_CHARACTERS,
    description:
      "Your identifier for the end user (1..256 characters, no control characters; not '.' or '..', which a URL path drops)",
    example: 'customer-42',
  })
  @IsNewUserId()
  user_id: string;

  /** Stored on creation only; ignored when the end user already exists (use PATCH). */
  @ApiPropertyOptional(METADATA_DOC)
  @IsOptional()
  @IsMetadata()
  metadata?: Record<string, unknown>;
}

/**
 * Paging of the end-user list. Not ListQueryDto: its cursor allows 256 UTF-16 units, while a
 * user_id may hold 256 characters outside the BMP (512 units).
 */
export class EndUserListQueryDto extends LimitQueryDto {
  /** The user_id of the last end user of the previous page. */
  @ApiPropertyOptional()
  @IsOptional()
  @IsUserId()
  starting_after?: string;
}

export class UpdateEndUserDto {
  @ApiProperty({
    ...METADATA_DOC,
    description: `Replaces the metadata. ${METADATA_DOC.description}`,
  })
  @IsDefined()
  @IsMetadata()
  metadata: Record<string, unknown>;
}

export class EndUserDto {
  @ApiProperty({ example: 'customer-42' })
  user_id: string;

  @ApiProperty(METADATA_DOC)
  metadata: Record<string, unknown>;

  @ApiProperty({ enum: ['active', 'deleting'] })
  status: EndUserStatus;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  updated_at: string;
}

export class EndUserDeletionDto {
  @ApiProperty({ example: 'customer-42' })
  user_id: string;

  @ApiProperty({ enum: ['deleting'] })
  status: 'deleting';

  @ApiProperty({
    example: '2026-11-22T01:24:16.678Z',
    description: 'When the erasure of all of the user’s data is expected to have finished',
  })
  erasure_expected_at: string;
}

export function toEndUserResponse(row: EndUserRow): EndUserDto {
  return {
    user_id: row.user_id,
    metadata: row.metadata,
    status: row.status,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
