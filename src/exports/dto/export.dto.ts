import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { FACT_SOURCES, type FactSource } from '../../memory/entities/fact.entity';
import { RepliesDto } from '../../personalities/dto/personality-content.dto';
import { SafetyVerdictDto } from '../../memory/dto/safety-verdict.dto';
import { ToolCallRecordDto } from '../../tools/dto/tool-definition.dto';

/**
 * The answers of /export and /model as schemas, for readers and generated clients. The export's
 * own contract is its JSON Schema, src/exports/schemas/pmf-v1.schema.json (published at
 * GET /v1/formats/pmf-v1.schema.json): these classes say the same.
 */
export class PmfEndUserDto {
  @ApiProperty({ minLength: 1, example: 'customer-42' })
  user_id: string;

  @ApiProperty({ type: 'object', additionalProperties: true })
  metadata: Record<string, unknown>;

  @ApiProperty({ enum: ['active', 'deleting'] })
  status: 'active' | 'deleting';

  @ApiProperty({ format: 'date-time' })
  created_at: string;

  @ApiProperty({ format: 'date-time' })
  updated_at: string;
}

export class PmfPersonalityDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty()
  source_slug: string;

  @ApiProperty()
  source_version: string;

  @ApiProperty()
  name: string;

  @ApiProperty()
  description: string;

  @ApiProperty({ type: [String] })
  traits: string[];

  @ApiProperty({ type: 'object', additionalProperties: true })
  voice: Record<string, unknown>;

  @ApiProperty()
  system_prompt: string;

  @ApiPropertyOptional({
    pattern: '^[a-z]{2}$',
    example: 'en',
    description: 'A BCP 47 primary language subtag; absent (older documents): en',
  })
  language?: string;

  @ApiPropertyOptional({
    type: RepliesDto,
    description: "The local engine's templates; absent (older documents): the catalog entry's",
  })
  replies?: RepliesDto;
}

export class PmfRelationshipDto {
  @ApiProperty({ format: 'uuid' })
  personality_id: string;

  @ApiProperty({ pattern: '^\\d{4}-(0[1-9]|1[0-2])$', example: '2026-11' })
  month: string;

  @ApiProperty({ format: 'date-time' })
  first_active_at: string;
}

export class PmfEmotionDto {
  @ApiProperty({ example: 'joy' })
  name: string;

  @ApiProperty({ minimum: 0, maximum: 1 })
  intensity: number;
}

export class PmfMemoryDto {
  @ApiProperty({ pattern: '^[0-9]+$', description: 'Increases with the order of writing' })
  id: string;

  @ApiProperty({ format: 'uuid' })
  personality_id: string;

  @ApiProperty({ enum: ['user', 'personality'], description: 'Who wrote it' })
  role: 'user' | 'personality';

  @ApiProperty()
  content: string;

  @ApiProperty({ type: PmfEmotionDto, nullable: true })
  emotion: PmfEmotionDto | null;

  @ApiProperty({ type: String, nullable: true })
  vocabulary_version: string | null;

  @ApiProperty({ format: 'date-time' })
  created_at: string;

  @ApiPropertyOptional({
    type: SafetyVerdictDto,
    nullable: true,
    description: 'The safety verdict when it was written; null before the service checked safety',
  })
  safety?: SafetyVerdictDto | null;

  @ApiPropertyOptional({
    type: [ToolCallRecordDto],
    nullable: true,
    description: "A reply's tool calls, in order (docs/tools.md); null or absent: it called none",
  })
  tool_calls?: ToolCallRecordDto[] | null;
}

export class PmfFactDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ minLength: 1, example: 'Their dog is called Rex.' })
  content: string;

  @ApiProperty({ enum: FACT_SOURCES })
  source: FactSource;

  @ApiProperty({
    type: String,
    nullable: true,
    pattern: '^[0-9]+$',
    description: 'The id of the memory of this document it was learned from; null for the API’s',
  })
  memory_id: string | null;

  @ApiProperty({ format: 'date-time' })
  created_at: string;

  @ApiProperty({ format: 'date-time' })
  updated_at: string;
}

/** A Personality and Memory Format v1 document (docs/pmf-v1.md). */
export class PmfDocumentDto {
  @ApiProperty({ enum: ['pmf'] })
  format: 'pmf';

  @ApiProperty({ enum: [1] })
  version: 1;

  @ApiProperty({ format: 'date-time' })
  exported_at: string;

  @ApiProperty({ type: PmfEndUserDto })
  end_user: PmfEndUserDto;

  @ApiProperty({
    type: [PmfPersonalityDto],
    description: 'Every personality that appears in the memories or relationships, as it is now',
  })
  personalities: PmfPersonalityDto[];

  @ApiProperty({
    type: [PmfRelationshipDto],
    description: 'One per (personality, UTC month) in which the user and the personality talked',
  })
  relationships: PmfRelationshipDto[];

  @ApiProperty({ type: [PmfMemoryDto], description: 'Every message, oldest first' })
  memories: PmfMemoryDto[];

  @ApiPropertyOptional({
    type: [PmfFactDto],
    description: 'Every fact about the end user, oldest first (absent in older documents)',
  })
  facts?: PmfFactDto[];
}

const ROW = { type: 'object', additionalProperties: true } as const;

/** The stored rows about an end user, table by table, each row as the database holds it. */
export class ModelTablesDto {
  @ApiProperty({ type: 'array', items: ROW })
  end_users: Array<Record<string, unknown>>;

  @ApiProperty({ type: 'array', items: ROW })
  relationship_months: Array<Record<string, unknown>>;

  @ApiProperty({ type: 'array', items: ROW })
  memories: Array<Record<string, unknown>>;

  @ApiProperty({ type: 'array', items: ROW })
  end_user_facts: Array<Record<string, unknown>>;

  @ApiProperty({ type: 'array', items: ROW })
  token_usage_end_user_months: Array<Record<string, unknown>>;

  @ApiProperty({ type: 'array', items: ROW })
  end_user_token_days: Array<Record<string, unknown>>;

  @ApiProperty({ type: 'array', items: ROW })
  tool_turns: Array<Record<string, unknown>>;

  @ApiProperty({ type: 'array', items: ROW })
  idempotency_keys: Array<Record<string, unknown>>;

  @ApiProperty({ type: 'array', items: ROW })
  audit_events: Array<Record<string, unknown>>;
}

export class ModelDocumentDto {
  @ApiProperty({ example: 'customer-42' })
  user_id: string;

  @ApiProperty({ format: 'date-time' })
  generated_at: string;

  @ApiProperty({ type: ModelTablesDto })
  tables: ModelTablesDto;
}
