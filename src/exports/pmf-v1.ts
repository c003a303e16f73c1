import type { ToolCallRecord } from '../tools/tool-turn-state';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FieldProblem } from '../common/errors/app-error';
import { schemaProblems } from '../common/validation/json-schema-problems';
import type { FactSource } from '../memory/entities/fact.entity';
import type { MemoryRole } from '../memory/entities/memory.entity';
import type { MemorySafety } from '../safety/safety-categories';
import type { PersonalityDocument } from '../personalities/personalities.service';

/** The published JSON Schema of the Personality and Memory Format v1 (docs/pmf-v1.md). */
export const PMF_V1_SCHEMA_PATH = join(__dirname, 'schemas', 'pmf-v1.schema.json');

export function readPmfV1Schema(): object {
  return JSON.parse(readFileSync(PMF_V1_SCHEMA_PATH, 'utf8')) as object;
}

/** A PMF v1 document, as the schema describes it (the TypeScript view of a valid one). */
export interface PmfDocument {
  format: 'pmf';
  version: 1;
  exported_at: string;
  end_user: PmfEndUser;
  personalities: PersonalityDocument[];
  relationships: Array<{ personality_id: string; month: string; first_active_at: string }>;
  memories: PmfMemory[];
  facts?: PmfFact[];
}

export interface PmfEndUser {
  user_id: string;
  metadata: Record<string, unknown>;
  status: 'active' | 'deleting';
  created_at: string;
  updated_at: string;
}

export interface PmfMemory {
  id: string;
  personality_id: string;
  role: MemoryRole;
  content: string;
  emotion: { name: string; intensity: number } | null;
  vocabulary_version: string | null;
  created_at: string;
  /** Optional: documents written before the service checked safety have none. */
  safety?: MemorySafety | null;
  /** Optional: a reply's tool calls (docs/tools.md); null or left out for none. */
  tool_calls?: ToolCallRecord[] | null;
}

export interface PmfFact {
  id: string;
  content: string;
  source: FactSource;
  memory_id: string | null;
  created_at: string;
  updated_at: string;
}

/** The arrays of a document, read an item at a time (ImportChecker, ImportService). */
export const PMF_ARRAYS = ['personalities', 'relationships', 'memories', 'facts'] as const;
export type PmfArray = (typeof PMF_ARRAYS)[number];

/** The $defs entry each array's items follow in the published schema. */
const ITEM_DEFINITION: Record<PmfArray, string> = {
  personalities: 'personality',
  relationships: 'relationship',
  memories: 'memory',
  facts: 'fact',
};

/**
 * Validates a document against the published schema itself (the file GET
 * /v1/formats/pmf-v1.schema.json serves), with ajv, a part at a time, so that a document is never
 * held whole: its root object with every array left empty (`root`), then each item of an array
 * against the schema's own definition for it (`item`). Together they are the whole schema: the
 * root's rules for the arrays are their type and their items' definition. Compiled once.
 */
export class PmfV1Validator {
  private readonly root: ValidateFunction;
  private readonly items: Record<PmfArray, ValidateFunction>;

  constructor(
    schema: { $id: string; properties: Record<string, object> } = readPmfV1Schema() as never,
  ) {
    const ajv = new Ajv2020({ allErrors: true, strict: true });
    addFormats(ajv, ['date-time', 'uuid']);
    ajv.addSchema(schema);
    this.items = Object.fromEntries(
      PMF_ARRAYS.map((array) => [
        array,
        ajv.getSchema(`${schema.$id}#/$defs/${ITEM_DEFINITION[array]}`)!,
      ]),
    ) as Record<PmfArray, ValidateFunction>;
    // The root's own rules: the same schema, its arrays' items not looked into.
    const properties = { ...schema.properties };
    for (const array of PMF_ARRAYS) {
      const { items: _items, ...own } = properties[array] as { items?: unknown };
      properties[array] = own;
    }
    this.root = ajv.compile({
      ...schema,
      $id: schema.$id.replace(/\.schema\.json$/, '-root.schema.json'),
      properties,
    });
  }

  /** The problems of the root object, its arrays replaced by empty ones, by JSON pointer. */
  rootProblems(root: Record<string, unknown>): ProblemList {
    return this.problems(this.root, root, '');
  }

  /** The problems of one item of an array, by JSON pointer from the document's root. */
  itemProblems(array: PmfArray, index: number, item: unknown): ProblemList {
    return this.problems(this.items[array], item, `/${array}/${index}`);
  }

  private problems(check: ValidateFunction, value: unknown, prefix: string): ProblemList {
    if (check(value)) return NO_PROBLEMS;
    const errors = check.errors ?? [];
    return { listed: schemaProblems(errors, prefix), total: errors.length };
  }
}

/** Problems of one part: the first MAX_LISTED_PROBLEMS, and how many there are. */
export interface ProblemList {
  listed: FieldProblem[];
  total: number;
}

const NO_PROBLEMS: ProblemList = { listed: [], total: 0 };
