import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional } from 'class-validator';
import { ROLES, type Role } from '../entities/membership.entity';
import type { MemberRow } from '../members.repository';

export class MemberDto {
  @ApiProperty({ format: 'uuid' })
  user_id: string;

  @ApiProperty()
  email: string;

  @ApiProperty({ nullable: true, type: String })
  name: string | null;

  @ApiProperty({ enum: ROLES })
  role: string;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  joined_at: string;
}

export class UpdateMemberDto {
  @ApiProperty({ enum: ROLES, description: 'Only an owner grants or removes `owner`' })
  @IsIn(ROLES)
  role: Role;
}

export class RemoveMemberQueryDto {
  @ApiPropertyOptional({
    enum: ['true', 'false'],
    default: 'false',
    description:
      'true: the API keys the member made stay valid (by default they are revoked with the membership). Not honoured for a member who leaves',
  })
  @IsOptional()
  @IsIn(['true', 'false'])
  keep_api_keys?: 'true' | 'false';
}

export function toMemberResponse(row: MemberRow): MemberDto {
  return {
    user_id: row.user_id,
    email: row.email,
    name: row.name,
    role: row.role,
    joined_at: row.joined_at.toISOString(),
  };
}
