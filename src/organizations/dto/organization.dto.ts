import { ApiProperty } from '@nestjs/swagger';
import { IsString, MaxLength, MinLength } from 'class-validator';
import { NoControlCharacters } from '../../common/validation/no-control-characters';
import { ROLES } from '../entities/membership.entity';

export class CreateOrganizationDto {
  @ApiProperty({ example: 'Acme Support', minLength: 1, maxLength: 200 })
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  @NoControlCharacters()
  name: string;
}

export class OrganizationDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty()
  name: string;

  @ApiProperty({ enum: ROLES, description: "The authenticated user's role" })
  role: string;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;
}
