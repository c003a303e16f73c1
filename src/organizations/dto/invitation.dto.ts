import { ApiProperty } from '@nestjs/swagger';
import { IsNewAddress } from '../../common/validation/new-address';
import { IsIn, IsString, MaxLength, MinLength } from 'class-validator';
import { ROLES, type Role } from '../entities/membership.entity';
import type { InvitationRow } from '../invitations.repository';

export class CreateInvitationDto {
  @ApiProperty({ example: 'grace@example.com', maxLength: 254, format: 'email' })
  @IsNewAddress()
  @MaxLength(254)
  email: string;

  @ApiProperty({ enum: ROLES, description: 'Only an owner invites an `owner`' })
  @IsIn(ROLES)
  role: Role;
}

export class AcceptInvitationDto {
  @ApiProperty({ description: 'The token from the link in the invitation e-mail', maxLength: 512 })
  @IsString()
  @MinLength(1)
  @MaxLength(512)
  token: string;
}

export class InvitationDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty()
  email: string;

  @ApiProperty({ enum: ROLES })
  role: string;

  @ApiProperty({ enum: ['pending', 'accepted', 'revoked', 'expired'] })
  status: string;

  @ApiProperty({ example: '2026-11-29T01:23:45.678Z' })
  expires_at: string;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;
}

export function toInvitationResponse(row: InvitationRow): InvitationDto {
  return {
    id: row.id,
    email: row.email,
    role: row.role,
    status: row.status,
    expires_at: row.expires_at.toISOString(),
    created_at: row.created_at.toISOString(),
  };
}
