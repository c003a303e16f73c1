import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import { RE2 } from 're2-wasm';
import type { FieldProblem } from '../common/errors/app-error';
import { MAX_LISTED_PROBLEMS, schemaProblems } from '../common/validation/json-schema-problems';

/** Tools a personality may have (contract §26). */
export const MAX_TOOLS = 32;
/** A tool's `parameters` schema, serialised, at most this many bytes. */
export const MAX_PARAMETERS_BYTES = 16 * 1024;
export const DEFAULT_TOOL_TIMEOUT_MS = 10_000;

export type ToolExecution = 'client' | 'webhook';

/** A client tool sent with one request to /v1/respond. */
export interface RequestTool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** A tool as a personality stores it (jsonb) and shows it. */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  execution: ToolExecution;
  /** Webhook tools only: the organization's webhook endpoint called. */
  endpoint_id?: string;
  /** Webhook tools only. */
  timeout_ms?: number;
}

const UUID = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

const COMMON_PROPERTIES = {
  name: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
  description: { type: 'string', minLength: 1, maxLength: 1024 },
  parameters: { type: 'object' },
} as const;

/** The shape of a personality's tool; the `parameters` schema itself is compiled apart. */
const PERSONALITY_TOOL_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'description', 'parameters', 'execution'],
  properties: {
    ...COMMON_PROPERTIES,
    execution: { enum: ['client', 'webhook'] },
    endpoint_id: { type: 'string', pattern: UUID },
    timeout_ms: { type: 'integer', minimum: 100, maximum: 30_000 },
  },
} as const;

/** A tool sent with one request: always the client's to run. */
const REQUEST_TOOL_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'description', 'parameters'],
  properties: COMMON_PROPERTIES,
} as const;

// One instance for the fixed shapes; the tools' own schemas get their own (see compileParameters).
const shapes = new Ajv2020({ allErrors: true });
const personalityTool = shapes.compile(PERSONALITY_TOOL_SCHEMA);
const requestTool = shapes.compile(REQUEST_TOOL_SCHEMA);

/**
 * The regular expressions of a business's schema (`pattern`, `patternProperties`) run on
 * arguments the model, or an end user through the local engine's trigger, wrote: in RE2, whose
 * time is linear in the input. JavaScript's engine backtracks, and `^(a+)+$` against 28 a's and a
 * b held the event loop, every tenant's requests with it, for 12 s. RE2 has no backreferences and
 * no lookaround: a schema using them does not compile, and is refused with a 400.
 */
const linearRegExp = Object.assign(
  (pattern: string, flags: string) => new RE2(pattern, flags.includes('u') ? flags : `${flags}u`),
  { code: 'new (require("re2-wasm").RE2)' },
);

/**
 * A business's schema compiled for validating arguments. Strict mode is off: unknown keywords
 * are common in hand-written schemas and harmless. A fresh instance each time, so that one
 * schema's `$id` cannot clash with another's.
 */
export function compileParameters(schema: object): ValidateFunction {
  return new Ajv2020({ strict: false, allErrors: true, code: { regExp: linearRegExp } }).compile(
    schema,
  );
}

/** Why a tool's `parameters` is refused, or undefined when it is a usable object schema. */
function parametersProblem(parameters: Record<string, unknown>): string | undefined {
  if (Buffer.byteLength(JSON.stringify(parameters)) > MAX_PARAMETERS_BYTES) {
    return `must be at most ${MAX_PARAMETERS_BYTES} bytes serialised`;
  }
  if (parameters.type !== 'object') return 'must be a JSON Schema of type "object"';
  try {
    compileParameters(parameters);
    return undefined;
  } catch (error) {
    const reason = error instanceof Error ? error.message : 'it does not compile';
    return `must be a valid JSON Schema (draft 2020-12): ${reason.slice(0, 200)}`;
  }
}

/**
 * The problems of a `tools` array, each named by its pointer under `field` (`tools/3/parameters`):
 * its items' shape, their schemas and duplicate names. Endpoints are the caller's to check.
 */
export function toolProblems(
  tools: unknown[],
  kind: 'personality' | 'request',
  field = 'tools',
): FieldProblem[] {
  const validate = kind === 'personality' ? personalityTool : requestTool;
  const problems: FieldProblem[] = [];
  const seen = new Set<string>();
  tools.forEach((tool, index) => {
    const at = `${field}/${index}`;
    if (!validate(tool)) {
      problems.push(...schemaProblems(validate.errors ?? [], at));
      return;
    }
    const { name, parameters, execution, endpoint_id, timeout_ms } = tool as ToolDefinition;
    if (execution === 'webhook' && endpoint_id === undefined) {
      problems.push({ field: `${at}/endpoint_id`, problem: 'is required for a webhook tool' });
    }
    if (execution === 'client') {
      if (endpoint_id !== undefined) {
        problems.push({ field: `${at}/endpoint_id`, problem: 'is for webhook tools only' });
      }
      if (timeout_ms !== undefined) {
        problems.push({ field: `${at}/timeout_ms`, problem: 'is for webhook tools only' });
      }
    }
    if (seen.has(name)) problems.push({ field: `${at}/name`, problem: 'must be unique' });
    seen.add(name);
    const problem = parametersProblem(parameters);
    if (problem) problems.push({ field: `${at}/parameters`, problem });
  });
  return problems.slice(0, MAX_LISTED_PROBLEMS);
}

/** A personality's tools as stored: webhook tools get their default timeout. */
export function storedTools(tools: ToolDefinition[]): ToolDefinition[] {
  return tools.map((tool) =>
    tool.execution === 'webhook'
      ? { ...tool, timeout_ms: tool.timeout_ms ?? DEFAULT_TOOL_TIMEOUT_MS }
      : tool,
  );
}
