import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsNewAddress } from '../../common/validation/new-address';
import { IsOptional, IsString, MaxLength, MinLength } from 'class-validator';
import { NoControlCharacters } from '../../common/validation/no-control-characters';
import { HasVisibleText } from '../../common/validation/visible-text';
import { OrganizationDto } from '../../organizations/dto/organization.dto';

export const PASSWORD_MIN = 12;
export const PASSWORD_MAX = 256;

export class SignupDto {
  @ApiProperty({ example: 'ada@example.com', maxLength: 254, format: 'email' })
  @IsNewAddress()
  @MaxLength(254)
  email: string;

  @ApiProperty({
    minLength: PASSWORD_MIN,
    maxLength: PASSWORD_MAX,
    description: 'Used exactly as sent, never truncated',
  })
  @IsString()
  @MinLength(PASSWORD_MIN)
  @MaxLength(PASSWORD_MAX)
  password: string;

  @ApiPropertyOptional({ example: 'Ada Lovelace', maxLength: 200 })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  @NoControlCharacters()
  name?: string;

  @ApiPropertyOptional({
    example: 'Acme Support',
    maxLength: 200,
    description: 'Defaults to "<name or e-mail>\'s organization"',
  })
  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  @NoControlCharacters()
  @HasVisibleText()
  organization_name?: string;
}

export class UserDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty()
  email: string;

  @ApiProperty({ nullable: true, type: String })
  name: string | null;

  @ApiProperty()
  created_at: string;
}

export class AccessTokenDto {
  @ApiProperty({ description: 'A JWT to send as `Authorization: Bearer <token>`' })
  access_token: string;

  @ApiProperty({ enum: ['Bearer'] })
  token_type: 'Bearer';

  @ApiProperty({ description: 'Seconds until the token expires' })
  expires_in: number;
}

export class SignupResponseDto extends AccessTokenDto {
  @ApiProperty({ type: UserDto })
  user: UserDto;

  @ApiProperty({ type: OrganizationDto })
  organization: OrganizationDto;
}
