import type { ErrorObject } from 'ajv';
import type { FieldProblem } from '../errors/app-error';

/** At most this many problems are listed in an error's `details`; the message gives the count. */
export const MAX_LISTED_PROBLEMS = 20;

/** RFC 6901: `~` and `/` in a key are escaped. */
export function pointerToken(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * ajv's errors as `{field: <JSON pointer>, problem}`: a missing or unknown property is named by
 * its own pointer rather than its parent's, so a client sees which field to add or remove.
 * `prefix` is the pointer of the validated value inside the request (empty: the body itself).
 */
export function schemaProblems(
  errors: readonly ErrorObject[],
  prefix = '',
  limit = MAX_LISTED_PROBLEMS,
): FieldProblem[] {
  return errors.slice(0, limit).map((error) => {
    const at = `${prefix}${error.instancePath}`;
    switch (error.keyword) {
      case 'required':
        return {
          field: `${at}/${pointerToken(String(error.params.missingProperty))}`,
          problem: 'is required',
        };
      case 'additionalProperties':
        return {
          field: `${at}/${pointerToken(String(error.params.additionalProperty))}`,
          problem: 'is not a known field',
        };
      case 'enum':
        return {
          field: at,
          problem: `must be one of ${JSON.stringify(error.params.allowedValues)}`,
        };
      case 'const':
        return { field: at, problem: `must be ${JSON.stringify(error.params.allowedValue)}` };
      default:
        return { field: at, problem: error.message ?? 'is not valid' };
    }
  });
}
