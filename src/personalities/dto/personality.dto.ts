import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsIn,
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
import type { CatalogPersonality } from '../entities/catalog-personality.entity';
import type { Personality } from '../entities/personality.entity';

export class VoiceDto {
  @ApiProperty({ example: 'warm and unhurried' })
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  tone: string;

  @ApiProperty({ enum: ['casual', 'neutral', 'formal'] })
  @IsIn(['casual', 'neutral', 'formal'])
  formality: 'casual' | 'neutral' | 'formal';

  @ApiProperty({ example: 'Short paragraphs, one question at the end.' })
  @IsString()
  @MaxLength(1000)
  style_notes: string;
}

const templates = () => [
  IsArray(),
  ArrayMinSize(1),
  ArrayMaxSize(20),
  IsString({ each: true }),
  MinLength(1, { each: true }),
  MaxLength(4000, { each: true }),
];

function Templates(): PropertyDecorator {
  return (target, key) => templates().forEach((decorate) => decorate(target, key));
}

/** Reply templates of the default engine, by valence; `{emotion}` and `{memory}` are filled in. */
export class RepliesDto {
  @ApiProperty()
  @IsString()
  @MinLength(1)
  @MaxLength(4000)
  first_meeting: string;

  @ApiProperty({ type: [String] })
  @Templates()
  positive: string[];

  @ApiProperty({ type: [String] })
  @Templates()
  negative: string[];

  @ApiProperty({ type: [String] })
  @Templates()
  ambiguous: string[];

  @ApiProperty({ type: [String] })
  @Templates()
  neutral: string[];

  @ApiProperty({ type: [String], description: 'Used when the personality recalls a memory' })
  @Templates()
  recall: string[];
}

/** What a catalog entry and its clones have in common: the personality itself. */
export class PersonalityContentDto {
  @ApiProperty({ example: 'Sage' })
  name: string;

  @ApiProperty()
  description: string;

  @ApiProperty({ type: [String] })
  traits: string[];

  @ApiProperty({ type: VoiceDto })
  voice: VoiceDto;

  @ApiProperty()
  system_prompt: string;

  @ApiProperty({ type: RepliesDto })
  replies: RepliesDto;
}

export class CatalogEntryDto extends PersonalityContentDto {
  @ApiProperty({ example: 'sage-mentor' })
  slug: string;

  @ApiProperty({ example: '1.0.0' })
  version: string;

  @ApiProperty()
  updated_at: string;
}

export class FromCatalogDto {
  @ApiProperty({ example: 'sage-mentor' })
  @IsString()
  @MinLength(1)
  @MaxLength(64)
  slug: string;
}

export class PersonalityDto extends PersonalityContentDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ example: 'sage-mentor', description: 'The catalog entry it was copied from' })
  source_slug: string;

  @ApiProperty({ example: '1.0.0', description: 'The version of the entry when it was copied' })
  source_version: string;

  @ApiProperty({
    type: String,
    nullable: true,
    example: 'gpt-4o-mini',
    description: 'The model the OpenAI-compatible engine asks for; null: the OPENAI_MODEL default',
  })
  model: string | null;

  @ApiProperty()
  created_at: string;

  @ApiProperty()
  updated_at: string;
}

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
}

export function toCatalogEntryResponse(entry: CatalogPersonality): CatalogEntryDto {
  return {
    slug: entry.slug,
    name: entry.name,
    description: entry.description,
    version: entry.version,
    traits: entry.traits,
    voice: entry.voice,
    system_prompt: entry.systemPrompt,
    replies: entry.replies,
    updated_at: entry.updatedAt.toISOString(),
  };
}

export function toPersonalityResponse(personality: Personality): PersonalityDto {
  return {
    id: personality.id,
    source_slug: personality.sourceSlug,
    source_version: personality.sourceVersion,
    model: personality.model,
    name: personality.name,
    description: personality.description,
    traits: personality.traits,
    voice: personality.voice,
    system_prompt: personality.systemPrompt,
    replies: personality.replies,
    created_at: personality.createdAt.toISOString(),
    updated_at: personality.updatedAt.toISOString(),
  };
}
