import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, IsUUID, Matches } from 'class-validator';
import { LimitQueryDto } from '../../common/pagination/pagination';
import type { MemoryRow } from '../memories.repository';
import { SafetyVerdictDto } from './safety-verdict.dto';
import { ToolCallRecordDto } from '../../tools/dto/tool-definition.dto';
import { UserIdParamDto } from '../../end-users/dto/user-id';
import { QueryInteger } from '../../common/validation/query-integer';

/** The longest message of an end user (`message` of POST /v1/respond), in characters. */
export const USER_MESSAGE_MAX_CHARACTERS = 8_000;

/**
 * The longest personality's message an import takes, in characters. Replies have no limit of
 * their own (a model's reply is as long as the model writes it), so this only keeps one memory
 * of a document from being most of it: four times a user's message.
 */
export const IMPORTED_REPLY_MAX_CHARACTERS = 32_000;

/** Memory ids are PostgreSQL bigints in decimal; 18 digits stay below the bigint maximum. */
const MEMORY_ID = /^[1-9]\d{0,17}$/;

export class MemoryListQueryDto extends LimitQueryDto {
  @ApiPropertyOptional({ format: 'uuid', description: 'Only the memories with this personality' })
  @IsOptional()
  @IsUUID('all')
  personality_id?: string;

  /** The id of the last memory of the previous page. */
  @ApiPropertyOptional({ example: '1042' })
  @IsOptional()
  @Matches(MEMORY_ID, { message: 'starting_after must be the id of a memory' })
  starting_after?: string;
}

export const SEARCH_QUERY_MAX_CHARACTERS = 500;

export class MemorySearchQueryDto {
  @ApiProperty({
    minLength: 1,
    maxLength: SEARCH_QUERY_MAX_CHARACTERS,
    description: 'Words to look for; a memory holding any of them qualifies',
    example: 'what is my dog called',
  })
  @IsString()
  @Matches(/^[\s\S]{1,500}$/u, { message: 'q must be 1..500 characters' })
  q: string;

  @ApiPropertyOptional({ format: 'uuid', description: 'Only the memories with this personality' })
  @IsOptional()
  @IsUUID('all')
  personality_id?: string;

  @ApiPropertyOptional({ minimum: 1, maximum: 50, default: 10 })
  @IsOptional()
  @QueryInteger(1, 50)
  limit: number = 10;
}

/** `/v1/end-users/{user_id}/memories/{id}`. */
export class MemoryParamsDto extends UserIdParamDto {
  @ApiProperty({ example: '1042' })
  @Matches(MEMORY_ID, { message: 'id must be the id of a memory' })
  id: string;
}

export class MemoryEmotionDto {
  @ApiProperty({ example: 'joy' })
  name: string;

  @ApiProperty({ minimum: 0, maximum: 1, example: 0.6 })
  intensity: number;
}

export class MemoryDto {
  @ApiProperty({ example: '1042' })
  id: string;

  @ApiProperty({ format: 'uuid' })
  personality_id: string;

  @ApiProperty({ enum: ['user', 'personality'], description: 'Who said it' })
  role: 'user' | 'personality';

  @ApiProperty()
  content: string;

  @ApiProperty({ type: MemoryEmotionDto, nullable: true })
  emotion: MemoryEmotionDto | null;

  @ApiProperty({ type: String, nullable: true, example: '2.0.0' })
  vocabulary_version: string | null;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;

  @ApiProperty({
    type: SafetyVerdictDto,
    nullable: true,
    description:
      "The safety verdict when it was written: the message's, or the reply's; null before the service checked safety",
  })
  safety: SafetyVerdictDto | null;

  @ApiProperty({
    type: [ToolCallRecordDto],
    nullable: true,
    description: "A reply's tool calls, in order (docs/tools.md); null: it called none",
  })
  tool_calls: ToolCallRecordDto[] | null;
}

export class ScoredMemoryDto extends MemoryDto {
  @ApiProperty({
    minimum: 0,
    maximum: 1,
    example: 0.667,
    description:
      "The share of the query's words the memory holds, stop words aside and, when the query has others, the words the end user holds in 64 memories or more",
  })
  score: number;
}

export function toMemoryResponse(row: MemoryRow): MemoryDto {
  return {
    id: row.id,
    personality_id: row.personality_id,
    role: row.role,
    content: row.content,
    emotion: row.emotion === null ? null : { name: row.emotion, intensity: row.intensity ?? 0 },
    vocabulary_version: row.vocabulary_version,
    created_at: row.created_at.toISOString(),
    safety: row.safety,
    tool_calls: row.tool_calls ?? null,
  };
}
