import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayUnique,
  IsArray,
  IsOptional,
  IsString,
  IsUUID,
  Matches,
  MaxLength,
  MinLength,
  ValidateIf,
} from 'class-validator';
import { NoControlCharacters } from '../../common/validation/no-control-characters';
import { HasVisibleText } from '../../common/validation/visible-text';
import { SEARCH_QUERY_MAX_CHARACTERS } from '../../memory/dto/memory.dto';
import { IsLanguage } from '../../personalities/dto/language';
import { DEFAULT_LANGUAGE, type Language, LANGUAGES } from '../../personalities/languages';
import { QueryInteger } from '../../common/validation/query-integer';

/** A UUID in any case: one personality written twice in two cases is a repeated one. */
const caseless = (id: unknown) => (typeof id === 'string' ? id.toLowerCase() : id);

/** A document's content, in bytes of UTF-8, at most (past it: 413 payload_too_large). */
export const DOCUMENT_MAX_BYTES = 1024 * 1024;

/** Personalities one document names at most (attached to all of them: leave the field out). */
export const PERSONALITY_IDS_MAX = 100;

const IfGiven = () => ValidateIf((_dto: object, value: unknown) => value !== undefined);

const TITLE = { minLength: 1, maxLength: 200, example: 'Opening hours and returns' } as const;
const CONTENT = {
  description: `Plain text or Markdown, at most ${DOCUMENT_MAX_BYTES} bytes of UTF-8 (413 past it)`,
  example: '# Opening hours\n\nWe open at 9:00 and close at 18:00, Monday to Saturday.',
} as const;
const PERSONALITY_IDS = {
  type: String,
  format: 'uuid',
  isArray: true,
  maxItems: PERSONALITY_IDS_MAX,
} as const;

export class CreateKnowledgeDto {
  @ApiProperty(TITLE)
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  @NoControlCharacters()
  @HasVisibleText()
  title: string;

  /** From the `file` part in a multipart upload (the controller puts it here). */
  @ApiProperty(CONTENT)
  @IsString()
  content: string;

  @ApiPropertyOptional({
    enum: LANGUAGES,
    default: DEFAULT_LANGUAGE,
    description:
      'The language of the document (a BCP 47 primary language subtag): it is searched in it',
  })
  @IsOptional()
  @IsLanguage()
  language?: Language;

  @ApiPropertyOptional({
    ...PERSONALITY_IDS,
    description:
      'The personalities whose replies draw on the document; left out: every personality of the organization, now and later',
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(PERSONALITY_IDS_MAX)
  @ArrayUnique(caseless)
  @IsUUID('all', { each: true })
  personality_ids?: string[];
}

/** The multipart form of an upload: the content is the `file` part's. */
export class CreateKnowledgeFormDto {
  @ApiProperty(TITLE)
  title: string;

  @ApiProperty({
    type: 'string',
    format: 'binary',
    description: `text/plain, text/markdown or text/html (reduced to its text), UTF-8, at most ${DOCUMENT_MAX_BYTES} bytes`,
  })
  file: unknown;

  @ApiPropertyOptional({ enum: LANGUAGES, default: DEFAULT_LANGUAGE })
  language?: string;

  @ApiPropertyOptional({
    type: String,
    description: 'Personality ids separated by commas (or the field repeated); left out: all',
  })
  personality_ids?: string;
}

export class UpdateKnowledgeDto {
  @ApiPropertyOptional(TITLE)
  @IfGiven()
  @IsString()
  @MinLength(1)
  @MaxLength(200)
  @NoControlCharacters()
  @HasVisibleText()
  title?: string;

  @ApiPropertyOptional(CONTENT)
  @IfGiven()
  @IsString()
  content?: string;

  @ApiPropertyOptional({
    ...PERSONALITY_IDS,
    nullable: true,
    description: 'The personalities the document is attached to; null: every one, now and later',
  })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined && value !== null)
  @IsArray()
  @ArrayMaxSize(PERSONALITY_IDS_MAX)
  @ArrayUnique(caseless)
  @IsUUID('all', { each: true })
  personality_ids?: string[] | null;
}

export class KnowledgeDocumentDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty()
  title: string;

  @ApiProperty({ enum: LANGUAGES })
  language: string;

  @ApiProperty({
    ...PERSONALITY_IDS,
    nullable: true,
    description: 'The personalities it is attached to; null: every one of the organization',
  })
  personality_ids: string[] | null;

  @ApiProperty({ description: 'Size of the content in bytes of UTF-8' })
  bytes: number;

  @ApiProperty({ description: 'How many chunks it was split into' })
  chunks: number;

  @ApiProperty({ format: 'date-time' })
  created_at: string;

  @ApiProperty({ format: 'date-time' })
  updated_at: string;
}

export class KnowledgeDocumentWithContentDto extends KnowledgeDocumentDto {
  @ApiProperty({ description: 'The text as stored (an HTML upload: its text)' })
  content: string;
}

export class KnowledgeSearchQueryDto {
  @ApiProperty({
    minLength: 1,
    maxLength: SEARCH_QUERY_MAX_CHARACTERS,
    description: 'Words to look for; a chunk holding any of them qualifies',
    example: 'when do you open',
  })
  @IsString()
  @Matches(/^[\s\S]{1,500}$/u, { message: 'q must be 1..500 characters' })
  q: string;

  @ApiPropertyOptional({
    format: 'uuid',
    description: 'Only the documents attached to this personality',
  })
  @IsOptional()
  @IsUUID('all')
  personality_id?: string;

  @ApiPropertyOptional({ minimum: 1, maximum: 50, default: 10 })
  @IsOptional()
  @QueryInteger(1, 50)
  limit: number = 10;
}

export class KnowledgeSearchHitDto {
  @ApiProperty({ format: 'uuid' })
  document_id: string;

  @ApiProperty()
  title: string;

  @ApiProperty({ description: 'The position of the chunk in its document, from 0' })
  chunk_index: number;

  @ApiProperty()
  text: string;

  @ApiProperty({ description: 'Relevance to q (higher is better; comparable within one answer)' })
  score: number;
}

export class KnowledgeSearchResultDto {
  @ApiProperty({ type: [KnowledgeSearchHitDto] })
  data: KnowledgeSearchHitDto[];

  @ApiProperty({ enum: [false] })
  has_more: false;
}
