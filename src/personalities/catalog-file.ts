import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FieldProblem } from '../common/errors/app-error';
import { schemaProblems } from '../common/validation/json-schema-problems';
import type { CatalogEntryFile } from './entities/personality-definition';

export const SHIPPED_CATALOG_PATH = join(__dirname, 'data', 'catalog.json');
const SCHEMA_PATH = join(__dirname, 'schemas', 'catalog.schema.json');

let validators: { file: ValidateFunction; entry: ValidateFunction } | undefined;

/** The catalog file's schema, and its definition of one entry (a personality's definition). */
function catalogValidators(): { file: ValidateFunction; entry: ValidateFunction } {
  if (!validators) {
    const schema = JSON.parse(readFileSync(SCHEMA_PATH, 'utf8')) as { $id: string };
    const ajv = new Ajv2020({ allErrors: true, strict: true });
    ajv.addSchema(schema);
    validators = {
      file: ajv.getSchema(schema.$id)!,
      entry: ajv.getSchema(`${schema.$id}#/$defs/entry`)!,
    };
  }
  return validators;
}

function validate(value: unknown): ErrorObject[] {
  const { file } = catalogValidators();
  return file(value) ? [] : (file.errors ?? []);
}

/**
 * What makes `entry` no valid catalog entry, by JSON pointer inside it: the rules a personality's
 * definition meets when it is created from somewhere else than the catalog (an import).
 */
export function catalogEntryProblems(entry: CatalogEntryFile): FieldProblem[] {
  const { entry: check } = catalogValidators();
  return check(entry) ? [] : schemaProblems(check.errors ?? []);
}

/** Names where a problem is: `entry 2 ("sage-mentor") /voice/formality`. */
function describe(error: ErrorObject, data: unknown): string {
  const match = /^\/(\d+)(\/.*)?$/.exec(error.instancePath);
  if (!match) return `the file ${error.message ?? 'is not valid'}`;
  const index = Number(match[1]);
  const slug = (Array.isArray(data) ? (data[index] as { slug?: unknown }) : undefined)?.slug;
  const where = `entry ${index + 1}${typeof slug === 'string' ? ` ("${slug}")` : ''}`;
  const field = match[2] ?? '';
  const detail =
    error.keyword === 'additionalProperties'
      ? `has an unknown field "${String(error.params.additionalProperty)}"`
      : error.keyword === 'required'
        ? `is missing "${String(error.params.missingProperty)}"`
        : error.keyword === 'enum'
          ? `must be one of ${JSON.stringify(error.params.allowedValues)}`
          : (error.message ?? 'is not valid');
  return `${where}${field ? ` ${field}` : ''} ${detail}`;
}

/**
 * Parses and validates a whole catalog file (a JSON array of entries). Throws one Error listing
 * every problem, so a bad file is refused whole and can be fixed in one go.
 */
export function parseCatalog(text: string, source = 'catalog file'): CatalogEntryFile[] {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new Error(`${source} is not JSON: ${(error as Error).message}`);
  }
  const problems = validate(data).map((error) => describe(error, data));
  if (problems.length === 0) {
    const seen = new Set<string>();
    (data as CatalogEntryFile[]).forEach((entry, index) => {
      if (seen.has(entry.slug))
        problems.push(`entry ${index + 1} repeats the slug "${entry.slug}"`);
      seen.add(entry.slug);
    });
  }
  if (problems.length > 0) {
    throw new Error(`${source} was refused, nothing was imported:\n- ${problems.join('\n- ')}`);
  }
  return data as CatalogEntryFile[];
}

export function readCatalogFile(path: string): CatalogEntryFile[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`Cannot read ${path}: ${(error as Error).message}`);
  }
  return parseCatalog(text, path);
}
