import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppError } from '../common/errors/app-error';
import { schemaProblems } from '../common/validation/json-schema-problems';
import type { FactSource } from '../end-users/entities/fact.entity';
import type { MemoryRole, MemorySafety } from '../end-users/entities/memory.entity';
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
  end_user: {
    user_id: string;
    metadata: Record<string, unknown>;
    status: 'active' | 'deleting';
    created_at: string;
    updated_at: string;
  };
  personalities: PersonalityDocument[];
  relationships: Array<{ personality_id: string; month: string; first_active_at: string }>;
  memories: PmfMemory[];
  facts?: PmfFact[];
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
}

export interface PmfFact {
  id: string;
  content: string;
  source: FactSource;
  memory_id: string | null;
  created_at: string;
  updated_at: string;
}

/**
 * Validates documents against the published schema itself (the file GET
 * /v1/formats/pmf-v1.schema.json serves), with ajv. Compiled once.
 */
export class PmfV1Validator {
  private readonly check: ValidateFunction<PmfDocument>;

  constructor(schema: object = readPmfV1Schema()) {
    const ajv = new Ajv2020({ allErrors: true, strict: true });
    addFormats(ajv, ['date-time', 'uuid']);
    this.check = ajv.compile<PmfDocument>(schema);
  }

  /**
   * The value as a PMF v1 document; else 400 `validation_failed` naming the first
   * MAX_LISTED_PROBLEMS failing paths by JSON pointer, the message giving how many there are.
   */
  parse(value: unknown): PmfDocument {
    if (this.check(value)) return value;
    const errors = this.check.errors ?? [];
    throw AppError.validation(
      schemaProblems(errors),
      `The body is not a PMF v1 document (GET /v1/formats/pmf-v1.schema.json): ${errors.length} problem(s)`,
    );
  }
}
