import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ValidateBy } from 'class-validator';
import { DEFAULT_TOOL_TIMEOUT_MS, MAX_TOOL_TIMEOUT_MS, MAX_TOOLS } from '../tool-definitions';

/**
 * A tool the personality's model may call (contract §26, docs/tools.md). Described here for
 * OpenAPI only: the items are checked by toolProblems (ajv), which names each problem by its
 * pointer (`tools/3/parameters`).
 */
export class RequestToolDto {
  @ApiProperty({ pattern: '^[A-Za-z0-9_-]{1,64}$', example: 'lookup_order' })
  name: string;

  @ApiProperty({ minLength: 1, maxLength: 1024, example: "Looks up one of the user's orders" })
  description: string;

  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'A JSON Schema (draft 2020-12) of type "object", at most 16 KiB serialised',
    example: { type: 'object', properties: { order_id: { type: 'string' } } },
  })
  parameters: Record<string, unknown>;
}

export class ToolDefinitionDto extends RequestToolDto {
  @ApiProperty({
    enum: ['client', 'webhook'],
    description:
      'client: the turn pauses for the caller to run it; webhook: the service POSTs to endpoint_id',
  })
  execution: 'client' | 'webhook';

  @ApiPropertyOptional({
    format: 'uuid',
    description: 'Webhook tools: a webhook endpoint of the organization',
  })
  endpoint_id?: string;

  @ApiPropertyOptional({
    minimum: 100,
    maximum: MAX_TOOL_TIMEOUT_MS,
    default: DEFAULT_TOOL_TIMEOUT_MS,
    description: 'Webhook tools only',
  })
  timeout_ms?: number;
}

/** Why `value` is no `tools` array: not an array, too long, or an item not an object. */
function toolsArrayProblem(value: unknown): string | undefined {
  if (!Array.isArray(value)) return 'must be an array of tools';
  if (value.length > MAX_TOOLS) return `must hold at most ${MAX_TOOLS} tools`;
  if (!value.every((item) => item !== null && typeof item === 'object' && !Array.isArray(item))) {
    return 'must be an array of objects';
  }
  return undefined;
}

/**
 * The decorator of a `tools` array of a request body: one problem, the first that applies
 * (`null` was refused as not an array and as holding more than 32 at once; found by review);
 * the items' own rules are toolProblems' to check.
 */
export const ToolsArray = () =>
  ValidateBy({
    name: 'toolsArray',
    validator: {
      validate: (value) => toolsArrayProblem(value) === undefined,
      defaultMessage: (args) => `$property ${toolsArrayProblem(args?.value) ?? 'is not valid'}`,
    },
  });

/** Any JSON value, as OpenAPI says it (a schema of `type: object` reads as an empty object). */
export const ANY_JSON = [
  { type: 'object', additionalProperties: true },
  { type: 'array', items: {} },
  { type: 'string' },
  { type: 'number' },
  { type: 'boolean' },
];

/** A tool call as the reply's memory keeps it. */
export class ToolCallRecordDto {
  @ApiProperty({ example: 'call_8f2c1d9a4b7e6f3a2c1d9a4b' })
  id: string;

  @ApiProperty({ example: 'lookup_order' })
  name: string;

  @ApiProperty({
    description: 'As the model wrote them',
    example: { order_id: 'A-1042' },
    oneOf: ANY_JSON,
  })
  arguments: unknown;

  @ApiProperty({
    description: 'What the model was given',
    example: { status: 'shipped' },
    oneOf: ANY_JSON,
  })
  output: unknown;

  @ApiProperty({ enum: ['client', 'webhook'] })
  execution: 'client' | 'webhook';

  @ApiProperty({ type: Number, nullable: true, description: "A webhook call's duration" })
  duration_ms: number | null;

  @ApiProperty({ type: String, nullable: true, description: 'Why the call gave an error output' })
  error: string | null;
}
