import { ApiProperty } from '@nestjs/swagger';
import { IsString, IsUUID, MaxLength, MinLength } from 'class-validator';
import { FACT_SOURCES, type FactSource } from '../entities/fact.entity';
import { IdListQueryDto } from '../../common/pagination/pagination';
import {
  CONTROL_CHARACTER,
  NoControlCharacters,
} from '../../common/validation/no-control-characters';
import { isStorableText } from '../../common/validation/untrusted-json';
import { HasVisibleText, hasVisibleText } from '../../common/validation/visible-text';
import type { FactRow } from '../facts.repository';
import { UserIdParamDto } from '../../end-users/dto/user-id';

export const FACT_MAX_CHARACTERS = 500;
/** A fact an engine learns is shorter than one the business writes (contract §29). */
export const LEARNED_FACT_MAX_CHARACTERS = 200;

/**
 * A fact's content: 1..500 characters, not only white space or invisible characters (a fact of
 * zero-width spaces was a blank line in every prompt: found by review), no control characters.
 */
export class FactContentDto {
  @ApiProperty({
    minLength: 1,
    maxLength: FACT_MAX_CHARACTERS,
    example: 'Their dog is called Rex.',
  })
  @IsString()
  @MaxLength(FACT_MAX_CHARACTERS)
  @MinLength(1, { message: 'content must not be empty' })
  @HasVisibleText()
  @NoControlCharacters()
  content: string;
}

export class FactListQueryDto extends IdListQueryDto {}

/** `/v1/end-users/{user_id}/facts/{id}`. */
export class FactParamsDto extends UserIdParamDto {
  @ApiProperty({ format: 'uuid' })
  @IsUUID('all', { message: 'id must be the id of a fact' })
  id: string;
}

export class FactDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ example: 'Their dog is called Rex.' })
  content: string;

  @ApiProperty({
    enum: FACT_SOURCES,
    description: '`api`: written by the business; `engine`: learned from a message of the user',
  })
  source: FactSource;

  @ApiProperty({
    type: String,
    nullable: true,
    example: '1042',
    description: 'The memory (message) it was learned from; null for facts of the API',
  })
  memory_id: string | null;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  updated_at: string;
}

export function toFactResponse(row: FactRow): FactDto {
  return {
    id: row.id,
    content: row.content,
    source: row.source,
    memory_id: row.memory_id,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** Facts are one per content, case and white space aside. */
export function factKey(content: string): string {
  return content.trim().replace(/\s+/g, ' ').toLowerCase();
}

/** The content as stored: trimmed, runs of white space as one space. */
export function normalizeFact(content: string): string {
  return content.trim().replace(/\s+/g, ' ');
}

/**
 * A fact an engine learned, as it is stored (contract §29): one line, its white space (line
 * breaks, U+2028/U+2029 among it) collapsed to single spaces, of 1..LEARNED_FACT_MAX_CHARACTERS
 * characters. Undefined, so that the fact is dropped whole rather than cut mid-sentence, when it
 * is longer, shows nothing (empty, or invisible characters alone), or holds a control character, a NUL or an unpaired surrogate.
 */
export function learnedFact(statement: string): string | undefined {
  const fact = normalizeFact(statement);
  if (!hasVisibleText(fact) || CONTROL_CHARACTER.test(fact) || !isStorableText(fact)) {
    return undefined;
  }
  let characters = 0;
  for (const _ of fact) if (++characters > LEARNED_FACT_MAX_CHARACTERS) return undefined;
  return fact;
}
