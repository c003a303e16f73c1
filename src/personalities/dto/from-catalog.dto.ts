import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsString, MaxLength, MinLength, ValidateIf } from 'class-validator';
import { type Language } from '../languages';
import { ToolDefinitionDto, ToolsArray } from '../../tools/dto/tool-definition.dto';
import { ApiLanguageProperty, IsLanguage } from './language';

/** `POST /v1/personalities/from-catalog`: a personality is created by cloning a catalog entry. */
export class FromCatalogDto {
  @ApiProperty({ example: 'sage-mentor' })
  @IsString()
  @MinLength(1)
  @MaxLength(64)
  slug: string;

  @ApiLanguageProperty()
  // Left out means the default; null is not leaving it out.
  @ValidateIf((_dto: object, value: unknown) => value !== undefined)
  @IsLanguage()
  language?: Language;

  @ApiPropertyOptional({ type: [ToolDefinitionDto], maxItems: 32, default: [] })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined)
  @ToolsArray()
  tools?: ToolDefinitionDto[];
}
