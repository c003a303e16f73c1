import { ApiProperty } from '@nestjs/swagger';
import { ValidateBy, ValidationOptions } from 'class-validator';
import { CONTROL_CHARACTER } from '../../common/validation/no-control-characters';

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

export const IsUserId = (options?: ValidationOptions) =>
  ValidateBy(
    {
      name: 'isUserId',
      validator: {
        validate: (value) => userIdProblem(value) === null,
        defaultMessage: (args) => `$property ${userIdProblem(args?.value)}`,
      },
    },
    options,
  );

/** Why `value` is not valid metadata, or null: a JSON object of at most 16 KiB serialized. */
export function metadataProblem(value: unknown): string | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return 'must be a JSON object';
  if (Buffer.byteLength(JSON.stringify(value)) > METADATA_MAX_BYTES)
    return `must be at most ${METADATA_MAX_BYTES} bytes when serialized as JSON`;
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
