import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsObject,
  IsOptional,
  IsString,
  IsUUID,
  MaxLength,
  MinLength,
  ValidateBy,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { ANY_JSON, RequestToolDto, ToolsArray } from '../../tools/dto/tool-definition.dto';
import { ErrorEnvelopeDto } from '../../common/errors/error-envelope';
import { holdsKeyLongerThan, nonFiniteNumberAt } from '../../common/validation/untrusted-json';
import { MAX_KEY_LENGTH } from '../../common/http/spooled-document';
import { USER_MESSAGE_MAX_CHARACTERS } from '../../memory/dto/memory.dto';
import { IsNewUserId, USER_ID_MAX_CHARACTERS } from '../../end-users/dto/user-id';
import { SafetyVerdictDto } from '../../memory/dto/safety-verdict.dto';
import { HasVisibleText } from '../../common/validation/visible-text';
import { MAX_TOOL_CALLS_PER_ROUND, TOOL_CALL_ID_MAX_CHARACTERS } from '../engine/response-engine';

export const MESSAGE_MAX_LENGTH = USER_MESSAGE_MAX_CHARACTERS;

export class RespondDto {
  @ApiProperty({ format: 'uuid', description: 'A personality of the organization' })
  @IsUUID()
  personality_id: string;

  @ApiProperty({
    minLength: 1,
    maxLength: USER_ID_MAX_CHARACTERS,
    description:
      "The end user; created on the first call (the same record as POST /v1/end-users, by the same rule: not '.' or '..')",
    example: 'customer-42',
  })
  @IsNewUserId()
  user_id: string;

  @ApiProperty({
    minLength: 1,
    maxLength: MESSAGE_MAX_LENGTH,
    example: 'I finally got the job!',
    description: 'At least one visible character: not only spaces or invisible ones',
  })
  @IsString()
  @MinLength(1)
  @MaxLength(MESSAGE_MAX_LENGTH)
  // A blank message was a paid model call for nothing, and an empty turn in the history
  // (review). An import still takes blank messages: exports made before hold some.
  @HasVisibleText()
  message: string;

  @ApiPropertyOptional({
    default: false,
    description: 'true: the reply comes as server-sent events (text/event-stream) as it is written',
  })
  @IsOptional()
  @IsBoolean()
  stream?: boolean;

  @ApiPropertyOptional({
    type: [RequestToolDto],
    maxItems: 32,
    description:
      "Client tools for this turn only, joining the personality's (a name in both: 400); docs/tools.md",
  })
  @ValidateIf((_dto: object, value: unknown) => value !== undefined)
  @ToolsArray()
  tools?: RequestToolDto[];
}

/** Any JSON value, `null` included: only a missing one is refused (IsDefined refuses null). */
const IsGiven = () =>
  ValidateBy({
    name: 'isGiven',
    validator: {
      validate: (value) => value !== undefined,
      defaultMessage: () => '$property must be given (any JSON, null included)',
    },
  });

/** JSON that is stored as it came: no number JSON cannot write (`1e999` would be kept as null). */
const IsWritableJson = () =>
  ValidateBy({
    name: 'isWritableJson',
    validator: {
      validate: (value) => nonFiniteNumberAt(value) === undefined,
      defaultMessage: () => '$property must hold only numbers JSON can write (not 1e999)',
    },
  });

/** JSON whose keys an export's import takes back (PMF, docs/pmf-v1.md). */
const HoldsNoLongKey = () =>
  ValidateBy({
    name: 'holdsNoLongKey',
    validator: {
      validate: (value) => !holdsKeyLongerThan(value, MAX_KEY_LENGTH),
      defaultMessage: () => `$property must hold no key longer than ${MAX_KEY_LENGTH} characters`,
    },
  });

/** The output of one tool call the paused turn asked for. */
export class ToolOutputDto {
  @ApiProperty({ example: 'call_8f2c1d9a4b7e6f3a2c1d9a4b' })
  @IsString()
  @MinLength(1)
  @MaxLength(TOOL_CALL_ID_MAX_CHARACTERS)
  tool_call_id: string;

  @ApiProperty({
    description: 'Any JSON: what the tool gave back',
    example: { status: 'shipped' },
    oneOf: ANY_JSON,
  })
  @IsGiven()
  @IsWritableJson()
  @HoldsNoLongKey()
  output: unknown;
}

/** `POST /v1/respond/turns/{turn_id}/tool-outputs`: the client's outputs resume the turn. */
export class ToolOutputsDto {
  @ApiProperty({
    type: [ToolOutputDto],
    maxItems: MAX_TOOL_CALLS_PER_ROUND,
    description: 'One output for every pending call',
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_TOOL_CALLS_PER_ROUND)
  @ValidateNested({ each: true })
  @IsObject({ each: true })
  @Type(() => ToolOutputDto)
  outputs: ToolOutputDto[];

  @ApiPropertyOptional({
    default: false,
    description: 'true: the answer comes as server-sent events, as on /v1/respond',
  })
  @IsOptional()
  @IsBoolean()
  stream?: boolean;
}

/** A tool call the client is to run: its output resumes the turn. */
export class ToolCallDto {
  @ApiProperty({
    example: 'call_8f2c1d9a4b7e6f3a2c1d9a4b',
    minLength: 1,
    maxLength: TOOL_CALL_ID_MAX_CHARACTERS,
    description: 'Unique within the round: what the output for this call answers',
  })
  id: string;

  @ApiProperty({ example: 'lookup_order' })
  name: string;

  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: "The arguments, valid against the tool's parameters schema",
    example: { order_id: 'A-1042' },
  })
  arguments: unknown;
}

/** A turn paused for client tools (`status: "requires_action"`): no reply yet, nothing stored. */
export class RespondRequiresActionDto {
  @ApiProperty({ enum: ['requires_action'] })
  status: 'requires_action';

  @ApiProperty({ example: 'turn_01JDZ6Q8B9N3X5W7Y2K4M6P8R0' })
  turn_id: string;

  @ApiProperty({ type: [ToolCallDto], maxItems: MAX_TOOL_CALLS_PER_ROUND })
  tool_calls: ToolCallDto[];

  @ApiProperty({ format: 'uuid' })
  personality_id: string;

  @ApiProperty({ example: 'customer-42' })
  user_id: string;
}

/** The `data` of a `tool_calls` event: the turn paused for these client tools. */
export class RespondToolCallsDto {
  @ApiProperty({ example: 'turn_01JDZ6Q8B9N3X5W7Y2K4M6P8R0' })
  turn_id: string;

  @ApiProperty({ type: [ToolCallDto], maxItems: MAX_TOOL_CALLS_PER_ROUND })
  tool_calls: ToolCallDto[];
}

export class RespondToolCallsEventDto {
  @ApiProperty({ enum: ['tool_calls'], description: 'The turn paused for client tools' })
  event: 'tool_calls';

  @ApiProperty({ type: RespondToolCallsDto })
  data: RespondToolCallsDto;
}

export class EmotionReadingDto {
  @ApiProperty({ example: 'joy', description: 'An emotion of the vocabulary version returned' })
  name: string;

  @ApiProperty({ minimum: 0, maximum: 1, example: 0.72 })
  intensity: number;
}

export class ReplyDto {
  @ApiProperty()
  text: string;

  @ApiProperty({ type: EmotionReadingDto })
  emotion: EmotionReadingDto;
}

/** A chunk of a knowledge document the engine was given for the reply (docs/knowledge.md). */
export class CitationDto {
  @ApiProperty({ format: 'uuid' })
  document_id: string;

  @ApiProperty()
  title: string;

  @ApiProperty({ description: 'The position of the chunk in its document, from 0' })
  chunk_index: number;
}

export class RespondResponseDto {
  @ApiProperty({ format: 'uuid' })
  personality_id: string;

  @ApiProperty({ example: 'customer-42' })
  user_id: string;

  @ApiProperty({ type: ReplyDto })
  reply: ReplyDto;

  @ApiProperty({
    type: String,
    nullable: true,
    example: 'gpt-4o-mini',
    description:
      'The model the service asked for on the route that wrote the reply: the personality’s model (or OPENAI_MODEL), or the fallback that answered when it failed; null for the local engine',
  })
  model: string | null;

  @ApiProperty({ example: '2.0.0', description: 'The emotion vocabulary the reply was read with' })
  vocabulary_version: string;

  @ApiProperty({
    type: SafetyVerdictDto,
    description: "The safety checks' verdict on the exchange (docs/safety.md)",
  })
  safety: SafetyVerdictDto;

  @ApiProperty({
    type: [CitationDto],
    description:
      "The chunks of the personality's knowledge documents the engine was given, most relevant first ([] when none)",
  })
  citations: CitationDto[];

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;

  @ApiProperty({
    enum: ['completed'],
    description: 'completed: the reply; a turn paused for client tools is requires_action',
  })
  status: 'completed';
}

/** What /v1/respond and a turn's tool outputs answer: the reply, or a pause for client tools. */
export type RespondAnswer = RespondResponseDto | RespondRequiresActionDto;

/** The `data` of a `delta` event: the next piece of the reply's text. */
export class RespondDeltaDto {
  @ApiProperty({ example: ' on the job!' })
  text: string;
}

/**
 * The events of a streamed reply (`"stream": true`), one schema per event: `event` is the SSE
 * `event:` line, `data` the JSON of its `data:` line.
 */
export class RespondDeltaEventDto {
  @ApiProperty({ enum: ['delta'] })
  event: 'delta';

  @ApiProperty({ type: RespondDeltaDto })
  data: RespondDeltaDto;
}

export class RespondDoneEventDto {
  @ApiProperty({ enum: ['done'], description: 'The last event of a complete reply' })
  event: 'done';

  @ApiProperty({
    description: 'What a non-streamed call answers',
    oneOf: [
      { $ref: '#/components/schemas/RespondResponseDto' },
      { $ref: '#/components/schemas/RespondRequiresActionDto' },
    ],
  })
  data: RespondAnswer;
}

export class RespondErrorEventDto {
  @ApiProperty({
    enum: ['error'],
    description:
      'The last event of a reply that failed after it started (502 `engine_unavailable`, 504 `engine_timeout`); nothing was stored',
  })
  event: 'error';

  @ApiProperty({ type: ErrorEnvelopeDto })
  data: ErrorEnvelopeDto;
}
