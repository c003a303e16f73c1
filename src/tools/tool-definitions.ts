import Ajv2020 from 'ajv/dist/2020';
import type { FieldProblem } from '../common/errors/app-error';
import {
  MAX_LISTED_PROBLEMS,
  pointerToken,
  schemaProblems,
} from '../common/validation/json-schema-problems';
import { nonFiniteNumberAt } from '../common/validation/untrusted-json';
import { type SchemaTenant, toolSchemas } from './tool-schemas';

/** Tools a personality may have (contract §26). */
export const MAX_TOOLS = 32;
/** A tool's `parameters` schema, serialised, at most this many bytes. */
export const MAX_PARAMETERS_BYTES = 16 * 1024;
export const DEFAULT_TOOL_TIMEOUT_MS = 10_000;
/** The longest a webhook tool may be waited for (`timeout_ms`): a round's calls run together. */
export const MAX_TOOL_TIMEOUT_MS = 30_000;

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
    timeout_ms: { type: 'integer', minimum: 100, maximum: MAX_TOOL_TIMEOUT_MS },
  },
} as const;

/** A tool sent with one request: always the client's to run. */
const REQUEST_TOOL_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'description', 'parameters'],
  properties: COMMON_PROPERTIES,
} as const;

// One instance for the fixed shapes; the tools' own schemas are compiled apart (tool-schemas.ts).
const shapes = new Ajv2020({ allErrors: true });
const personalityTool = shapes.compile(PERSONALITY_TOOL_SCHEMA);
const requestTool = shapes.compile(REQUEST_TOOL_SCHEMA);

/**
 * A tool's schema may not hold regular expressions (`pattern`, `patternProperties`): they would
 * run on arguments the model, or an end user through the local engine's trigger, wrote, and
 * JavaScript's engine backtracks: `^(a+)+$` against 28 a's and a b held the event loop, every
 * tenant's requests with it, for 12 s. RE2 compiled to WebAssembly (re2-wasm) was tried: its fixed
 * 16 MiB heap is spent after about 1,900 compiled patterns, then it aborts for the whole process.
 */
const REGEX_KEYWORDS: ReadonlySet<string> = new Set(['pattern', 'patternProperties']);
/**
 * Keywords whose object maps names (not keywords) to schemas. `dependencies` too: Ajv2020 still
 * compiles it, and a name under it (`default`) is not the data keyword it spells.
 */
const NAMED_SCHEMAS: ReadonlySet<string> = new Set([
  'properties',
  '$defs',
  'definitions',
  'dependentSchemas',
  'dependencies',
]);
/** Keywords whose values are data, never schemas. */
const DATA_KEYWORDS: ReadonlySet<string> = new Set(['const', 'enum', 'default', 'examples']);

/** The JSON pointer of the first regular-expression keyword in a schema, if it has one. */
function regexKeywordIn(node: unknown, at = ''): string | undefined {
  if (Array.isArray(node)) {
    for (const [index, item] of node.entries()) {
      const found = regexKeywordIn(item, `${at}/${index}`);
      if (found) return found;
    }
    return undefined;
  }
  if (node === null || typeof node !== 'object') return undefined;
  for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
    if (REGEX_KEYWORDS.has(key)) return `${at}/${key}`;
    if (DATA_KEYWORDS.has(key)) continue;
    const entries =
      NAMED_SCHEMAS.has(key) && value !== null && typeof value === 'object'
        ? Object.entries(value as Record<string, unknown>).map(
            ([name, schema]) => [`${at}/${key}/${name}`, schema] as const,
          )
        : [[`${at}/${key}`, value] as const];
    for (const [pointer, schema] of entries) {
      const found = regexKeywordIn(schema, pointer);
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * References (`$ref`) are local JSON pointers to a subschema of the same schema
 * (`#/$defs/address`), never recursive, and the schema they make once written out in full has at
 * most this many subschemas. ajv validates a reference where it stands: a recursive one
 * (`anyOf: [{$ref: "#"}, {$ref: "#"}]`) doubled the work at each level of nested arguments
 * (0.5 s at 18 levels, hours at 40), and $defs each referring twice to the one before cost 2^n
 * on any argument; either held the event loop, every tenant's requests with it. A pointer into
 * data (`#/default`) would also carry a `pattern` past the check above.
 */
export const MAX_EXPANDED_SUBSCHEMAS = 2_048;
/**
 * Dynamic references resolve at validation time: not followed, so refused, with their anchors:
 * ajv compiles a subschema again for each anchor above it, so nested anchors cost 2^n compiles.
 */
const DYNAMIC_KEYWORDS: ReadonlySet<string> = new Set([
  '$dynamicRef',
  '$recursiveRef',
  '$dynamicAnchor',
  '$recursiveAnchor',
]);

/**
 * A `$ref` the walker resolves as ajv does: `#`, or `#` and segments of letters, digits, `_`, `.`,
 * `$`, `-` and the escapes `~0`, `~1`. No percent-encoding (ajv decodes each segment after
 * splitting, `#/a%2Fb` is the key `a/b`) and no empty segment (`#/` is the root to ajv).
 */
const LOCAL_POINTER = /^#(?:\/(?:[A-Za-z0-9_.$-]|~[01])+)*$/;

interface Subschema {
  node: Record<string, unknown>;
  /** The pointers of the subschemas directly under it. */
  children: string[];
}

/** Every subschema of `root` by its JSON pointer (`''`, the root), data keywords' values left out. */
function subschemasOf(root: Record<string, unknown>): Map<string, Subschema> {
  const found = new Map<string, Subschema>();
  const visit = (value: unknown, at: string, parent: Subschema | undefined): void => {
    if (Array.isArray(value)) {
      value.forEach((item, index) => visit(item, `${at}/${index}`, parent));
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const node = value as Record<string, unknown>;
    const subschema: Subschema = { node, children: [] };
    found.set(at, subschema);
    parent?.children.push(at);
    for (const [key, child] of Object.entries(node)) {
      if (DATA_KEYWORDS.has(key)) continue;
      const under = `${at}/${pointerToken(key)}`;
      if (NAMED_SCHEMAS.has(key) && child !== null && typeof child === 'object') {
        for (const [name, schema] of Object.entries(child as Record<string, unknown>)) {
          visit(schema, `${under}/${pointerToken(name)}`, subschema);
        }
      } else {
        visit(child, under, subschema);
      }
    }
  };
  visit(root, '', undefined);
  return found;
}

/** Why a schema's references are refused (see MAX_EXPANDED_SUBSCHEMAS), or undefined. */
function referencesProblem(root: Record<string, unknown>): string | undefined {
  const subschemas = subschemasOf(root);
  const targets = new Map<string, string>();
  for (const [at, { node }] of subschemas) {
    const dynamic = Object.keys(node).find((key) => DYNAMIC_KEYWORDS.has(key));
    if (dynamic) return `must not use dynamic references or anchors: ${at}/${dynamic}`;
    // Below the root an $id would start another document, which a pointer does not reach.
    if (at !== '' && '$id' in node) return `must not use $id below its root: ${at}/$id`;
    // Its validation is a promise, which no tool call waits for.
    if ('$async' in node) return `must not be asynchronous ($async): ${at}/$async`;
    if (!('$ref' in node)) continue;
    const ref = node.$ref;
    if (typeof ref !== 'string' || !LOCAL_POINTER.test(ref)) {
      return `must use $ref with a JSON pointer into the schema of letters, digits and _ . $ - ("#/$defs/Name"): ${at}/$ref`;
    }
    // The pointer's segments are escaped as pointerToken escapes them: the same text.
    const target = ref.slice(1);
    if (!subschemas.has(target)) return `has a $ref to no subschema of it: ${at}/$ref`;
    targets.set(at, target);
  }
  // The subschemas each one stands for once its references are written out, counted once each.
  const sizes = new Map<string, number>();
  const counting = new Set<string>();
  const sizeOf = (at: string): number => {
    const known = sizes.get(at);
    if (known !== undefined) return known;
    if (counting.has(at)) return Infinity;
    counting.add(at);
    let size = 1;
    const target = targets.get(at);
    if (target !== undefined) size += sizeOf(target);
    for (const child of subschemas.get(at)!.children) {
      if (size > MAX_EXPANDED_SUBSCHEMAS) break;
      size += sizeOf(child);
    }
    counting.delete(at);
    sizes.set(at, size);
    return size;
  };
  const tooMany = `must have at most ${MAX_EXPANDED_SUBSCHEMAS} subschemas once its $ref are written out`;
  for (const at of targets.keys()) {
    const size = sizeOf(at);
    if (size === Infinity) return `must not refer to itself ($ref): ${at}/$ref`;
    if (size > MAX_EXPANDED_SUBSCHEMAS) return tooMany;
  }
  return sizeOf('') > MAX_EXPANDED_SUBSCHEMAS ? tooMany : undefined;
}

/**
 * Why a schema may not be run on arguments: regular expressions, and references that recurse or
 * multiply the work. Checked here, before the worker compiles it, and again before a stored
 * tool's schema is run (one stored by an earlier release may hold what is refused now).
 */
export function unsafeSchemaProblem(parameters: Record<string, unknown>): string | undefined {
  const regex = regexKeywordIn(parameters);
  if (regex) return `must not use regular expressions (pattern, patternProperties): ${regex}`;
  return referencesProblem(parameters);
}

/**
 * Why a tool's `parameters` is refused, or undefined when it is a usable object schema; checked
 * in `tenant`'s turn (ToolSchemas).
 */
async function parametersProblem(
  tenant: SchemaTenant,
  parameters: Record<string, unknown>,
): Promise<string | undefined> {
  if (Buffer.byteLength(JSON.stringify(parameters)) > MAX_PARAMETERS_BYTES) {
    return `must be at most ${MAX_PARAMETERS_BYTES} bytes serialised`;
  }
  if (parameters.type !== 'object') return 'must be a JSON Schema of type "object"';
  // Written as JSON (stored, and the compiled schemas' cache key) it would be another schema.
  const unwritable = nonFiniteNumberAt(parameters);
  if (unwritable) {
    return `must hold only numbers JSON can write (not 1e999): /${unwritable.map(pointerToken).join('/')}`;
  }
  const unsafe = unsafeSchemaProblem(parameters);
  if (unsafe) return unsafe;
  const problem = await toolSchemas.problemOf(tenant, parameters);
  return problem === undefined
    ? undefined
    : `must be a valid JSON Schema (draft 2020-12): ${problem.slice(0, 200)}`;
}

/**
 * The problems of a `tools` array, each named by its pointer under `field` (`tools/3/parameters`):
 * its items' shape, their schemas and duplicate names. Endpoints are the caller's to check. The
 * schemas are checked in the turn of `tenant`, the organization they are for and its account.
 */
export async function toolProblems(
  tenant: SchemaTenant,
  tools: unknown[],
  kind: 'personality' | 'request',
  field = 'tools',
): Promise<FieldProblem[]> {
  const validate = kind === 'personality' ? personalityTool : requestTool;
  // In the tools' order, each schema's problem in its place once the worker has answered.
  const problems: Array<Promise<FieldProblem | undefined>> = [];
  const found = (...known: FieldProblem[]) =>
    problems.push(...known.map((problem) => Promise.resolve(problem)));
  const seen = new Set<string>();
  tools.forEach((tool, index) => {
    const at = `${field}/${index}`;
    if (!validate(tool)) {
      found(...schemaProblems(validate.errors ?? [], at));
      return;
    }
    const { name, parameters, execution, endpoint_id, timeout_ms } = tool as ToolDefinition;
    if (execution === 'webhook' && endpoint_id === undefined) {
      found({ field: `${at}/endpoint_id`, problem: 'is required for a webhook tool' });
    }
    if (execution === 'client') {
      if (endpoint_id !== undefined) {
        found({ field: `${at}/endpoint_id`, problem: 'is for webhook tools only' });
      }
      if (timeout_ms !== undefined) {
        found({ field: `${at}/timeout_ms`, problem: 'is for webhook tools only' });
      }
    }
    if (seen.has(name)) found({ field: `${at}/name`, problem: 'must be unique' });
    seen.add(name);
    problems.push(
      parametersProblem(tenant, parameters).then((problem) =>
        problem ? { field: `${at}/parameters`, problem } : undefined,
      ),
    );
  });
  const all = await Promise.all(problems);
  return all.filter((problem) => problem !== undefined).slice(0, MAX_LISTED_PROBLEMS);
}

/** A personality's tools as stored: webhook tools get their default timeout. */
export function storedTools(tools: ToolDefinition[]): ToolDefinition[] {
  return tools.map((tool) =>
    tool.execution === 'webhook'
      ? { ...tool, timeout_ms: tool.timeout_ms ?? DEFAULT_TOOL_TIMEOUT_MS }
      : tool,
  );
}
