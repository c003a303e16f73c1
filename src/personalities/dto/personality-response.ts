import { ApiProperty } from '@nestjs/swagger';
import type { CatalogPersonality } from '../entities/catalog-personality.entity';
import type { Personality } from '../entities/personality.entity';
import { ToolDefinitionDto } from '../../tools/dto/tool-definition.dto';
import { LANGUAGE_PROPERTY } from './language';
import { PersonalityContentDto } from './personality-content.dto';

export class CatalogEntryDto extends PersonalityContentDto {
  @ApiProperty({ example: 'sage-mentor' })
  slug: string;

  @ApiProperty({ example: '1.0.0' })
  version: string;

  @ApiProperty()
  updated_at: string;
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

  @ApiProperty(LANGUAGE_PROPERTY)
  language: string;

  @ApiProperty({ type: [ToolDefinitionDto], description: 'The tools its model may call' })
  tools: ToolDefinitionDto[];

  @ApiProperty()
  created_at: string;

  @ApiProperty()
  updated_at: string;
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
    language: personality.language,
    name: personality.name,
    description: personality.description,
    traits: personality.traits,
    voice: personality.voice,
    system_prompt: personality.systemPrompt,
    replies: personality.replies,
    tools: personality.tools,
    created_at: personality.createdAt.toISOString(),
    updated_at: personality.updatedAt.toISOString(),
  };
}
