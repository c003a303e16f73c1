import { ParseUUIDPipe } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';
import { IsString, MaxLength, MinLength } from 'class-validator';
import { AppError } from '../../common/errors/app-error';
import type { SsoIdentityRow } from '../sso.repository';

/** The path id of a linked identity: anything but a UUID names none (404, not 400). */
export const ssoIdentityIdPipe = new ParseUUIDPipe({
  exceptionFactory: () => AppError.notFound('SSO identity'),
});

export class SsoTokenDto {
  @ApiProperty({
    example: 'google',
    description: 'The id of a provider configured in SSO_PROVIDERS',
  })
  @IsString()
  @MinLength(1)
  @MaxLength(63)
  provider: string;

  @ApiProperty({ description: "The provider's OIDC id_token (a signed JWT)", maxLength: 16384 })
  @IsString()
  @MinLength(1)
  @MaxLength(16_384)
  id_token: string;
}

export class SsoIdentityDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ example: 'google' })
  provider: string;

  @ApiProperty({ description: "The provider's `sub` claim" })
  subject: string;

  @ApiProperty({ nullable: true, type: String, description: 'The `email` claim, if any' })
  email: string | null;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  linked_at: string;
}

export function toSsoIdentityResponse(row: SsoIdentityRow): SsoIdentityDto {
  return {
    id: row.id,
    provider: row.provider,
    subject: row.subject,
    email: row.email,
    linked_at: row.linked_at.toISOString(),
  };
}
