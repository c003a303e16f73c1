import { ApiProperty } from '@nestjs/swagger';
import { IsString, MaxLength, MinLength } from 'class-validator';

/** `POST /v1/personalities/from-catalog`: a personality is created by cloning a catalog entry. */
export class FromCatalogDto {
  @ApiProperty({ example: 'sage-mentor' })
  @IsString()
  @MinLength(1)
  @MaxLength(64)
  slug: string;
}
