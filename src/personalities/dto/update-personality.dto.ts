import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  MinLength,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { NoControlCharacters } from '../../common/validation/no-control-characters';
import { HasVisibleText } from '../../common/validation/visible-text';
import type { Language } from '../languages';
import { ToolDefinitionDto, ToolsArray } from '../../tools/dto/tool-definition.dto';
import { ApiLanguageProperty, IsLanguage } from './language';
import { RepliesDto, VoiceDto } from './personality-content.dto';

/**
 * A PATCH field may be left out, but null is not leaving it out: @IsOptional() lets null through,
 * to a NOT NULL column (500) or, for replies, into the stored personality, after which every reply
 * to a new end user failed.
 */
const IfGiven = () => ValidateIf((_dto: object, value: unknown) => value !== undefined);

export class UpdatePersonalityDto {
  @ApiPropertyOptional({ minLength: 1, maxLength: 100 })
  @IfGiven()
  @IsString()
  @MinLength(1)
  @MaxLength(100)
  @NoControlCharacters()
  @HasVisibleText()
  name?: string;

  @ApiPropertyOptional({ maxLength: 4000 })
  @IfGiven()
  @IsString()
  @MinLength(1)
  @MaxLength(4000)
  description?: string;

  @ApiPropertyOptional({ type: [String] })
  @IfGiven()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(20)
  @ArrayUnique()
  @IsString({ each: true })
  @Matches(/^.{1,50}$/, { each: true, message: 'each trait must be 1..50 characters' })
  traits?: string[];

  @ApiPropertyOptional({ type: VoiceDto })
  @IfGiven()
  @IsObject()
  @ValidateNested()
  @Type(() => VoiceDto)
  voice?: VoiceDto;

  @ApiPropertyOptional({ maxLength: 20000 })
  @IfGiven()
  @IsString()
  @MinLength(1)
  @MaxLength(20000)
  system_prompt?: string;

  @ApiPropertyOptional({ type: RepliesDto })
  @IfGiven()
  @IsObject()
  @ValidateNested()
  @Type(() => RepliesDto)
  replies?: RepliesDto;

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    minLength: 1,
    maxLength: 200,
    description: "The provider's model for this personality; null restores OPENAI_MODEL",
  })
  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  @NoControlCharacters()
  model?: string | null;

  @ApiLanguageProperty()
  @IfGiven()
  @IsLanguage()
  language?: Language;

  @ApiPropertyOptional({
    type: [ToolDefinitionDto],
    maxItems: 32,
    description: 'Replaces every tool of the personality',
  })
  @IfGiven()
  @ToolsArray()
  tools?: ToolDefinitionDto[];
}
