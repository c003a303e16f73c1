import { ApiProperty } from '@nestjs/swagger';
import { IsInt, IsString, Max, MaxLength, Min, MinLength, ValidateIf } from 'class-validator';
import { NoControlCharacters } from '../../common/validation/no-control-characters';
import { HasVisibleText } from '../../common/validation/visible-text';
import { ROLES } from '../entities/membership.entity';

export class CreateOrganizationDto {
  @ApiProperty({ example: 'Acme Support', minLength: 1, maxLength: 200 })
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  @NoControlCharacters()
  @HasVisibleText()
  name: string;
}

export class OrganizationDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty()
  name: string;

  @ApiProperty({ enum: ROLES, description: "The authenticated user's role" })
  role: string;

  @ApiProperty({
    type: Number,
    nullable: true,
    minimum: 1,
    maximum: 3650,
    description: 'Memories older than this many days are purged; null: kept forever',
  })
  memory_retention_days: number | null;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;
}

export class UpdateOrganizationDto {
  @ApiProperty({
    type: Number,
    nullable: true,
    minimum: 1,
    maximum: 3650,
    description:
      'Memories older than this many days are purged (facts stay); null keeps them forever',
  })
  // Required: the only field, and null is a value.
  @ValidateIf((_dto: object, value: unknown) => value !== null)
  @IsInt()
  @Min(1)
  @Max(3650)
  memory_retention_days: number | null;
}
