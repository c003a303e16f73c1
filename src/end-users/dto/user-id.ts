import { ApiProperty } from '@nestjs/swagger';
import { ValidateBy, ValidationOptions } from 'class-validator';
import { CONTROL_CHARACTER } from '../../common/validation/no-control-characters';
import {
  jsonDepth,
  MAX_FIELD_NAME,
  MAX_JSON_DEPTH,
  nonFiniteNumberAt,
} from '../../common/validation/untrusted-json';

export const USER_ID_MAX_CHARACTERS = 256;
export const METADATA_MAX_BYTES = 16 * 1024;

/** Why `value` is not a valid user_id, or null when it is (1..256 characters, no controls). */
export function userIdProblem(value: unknown): string | null {
  if (typeof value !== 'string') return 'must be a string';
  // Characters, not UTF-16 units: an emoji counts once.
  let characters = 0;
  for (const _ of value) {
    if (++characters > USER_ID_MAX_CHARACTERS) break;
  }
  if (characters === 0) return 'must not be empty';
  if (characters > USER_ID_MAX_CHARACTERS)
    return `must be at most ${USER_ID_MAX_CHARACTERS} characters`;
  if (CONTROL_CHARACTER.test(value)) return 'must not contain control characters';
  return null;
}

/**
 * Why `value` is not a user_id an end user may be created with, or null: userIdProblem, and not
 * `.` or `..`, which fetch, browsers and URL libraries remove from a path as dot segments (even
 * percent-encoded), so that `/v1/end-users/./facts` reaches the end user `facts` (found by
 * review). Ids in use stay valid in paths: one made before this rule can still be erased.
 */
export function newUserIdProblem(value: unknown): string | null {
  const problem = userIdProblem(value);
  if (problem) return problem;
  return value === '.' || value === '..' ? "must not be '.' or '..' (a URL path drops them)" : null;
}

const userIdRule =
  (name: string, problemOf: (value: unknown) => string | null) => (options?: ValidationOptions) =>
    ValidateBy(
      {
        name,
        validator: {
          validate: (value) => problemOf(value) === null,
          defaultMessage: (args) => `$property ${problemOf(args?.value)}`,
        },
      },
      options,
    );

/** A user_id that names an end user (a path, a cursor): userIdProblem. */
export const IsUserId = userIdRule('isUserId', userIdProblem);

/** A user_id that may create its end user (POST /v1/end-users, /v1/respond): newUserIdProblem. */
export const IsNewUserId = userIdRule('isNewUserId', newUserIdProblem);

/**
 * The deepest metadata the API takes: the request body that carries it is one level more, and a
 * body nests MAX_JSON_DEPTH levels at most.
 */
const METADATA_MAX_DEPTH = MAX_JSON_DEPTH - 1;

/**
 * Why `value` is not valid metadata, or null: a JSON object of at most 16 KiB serialized, nesting
 * at most METADATA_MAX_DEPTH levels (an import's, whose document may nest deeper, took 70 that a
 * PATCH of the same metadata then refused: found by review).
 */
export function metadataProblem(value: unknown): string | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return 'must be a JSON object';
  if (Buffer.byteLength(JSON.stringify(value)) > METADATA_MAX_BYTES)
    return `must be at most ${METADATA_MAX_BYTES} bytes when serialized as JSON`;
  if (jsonDepth(value) > METADATA_MAX_DEPTH)
    return `must not nest deeper than ${METADATA_MAX_DEPTH} levels`;
  // 1e309 parses as Infinity, which JSON writes as null: it was stored so without a word (review).
  const unwritable = nonFiniteNumberAt(value);
  if (unwritable !== undefined)
    return `must not hold a number JSON cannot write (too large for a double, at ${unwritable.join('.').slice(0, MAX_FIELD_NAME)})`;
  return null;
}

export const IsMetadata = (options?: ValidationOptions) =>
  ValidateBy(
    {
      name: 'isMetadata',
      validator: {
        validate: (value) => metadataProblem(value) === null,
        defaultMessage: (args) => `$property ${metadataProblem(args?.value)}`,
      },
    },
    options,
  );

/** The `{user_id}` path parameter, checked by the same rule as the body field. */
export class UserIdParamDto {
  @ApiProperty({
    description: 'Your identifier for the end user (1..256 characters, no control characters)',
    example: 'customer-42',
  })
  @IsUserId()
  user_id: string;
}
