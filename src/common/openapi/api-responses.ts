import { applyDecorators, Type } from '@nestjs/common';
import { ApiExtraModels, ApiResponse, getSchemaPath } from '@nestjs/swagger';
import { ErrorEnvelopeDto } from '../errors/error-envelope';

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (`validation_failed`, `malformed_json`, …)',
  401: 'Not authenticated',
  403: 'Forbidden',
  404: 'Not found (`not_found`), also for another organization’s resource',
  409: 'Conflict',
  413: 'Body over 1 MiB (`payload_too_large`)',
  415: 'Body is not application/json (`unsupported_media_type`)',
  423: 'Locked',
  502: 'The payment provider failed (`payment_provider_error`)',
  503: 'Unavailable',
};

/** Documents error responses with the envelope schema; descriptions may be overridden. */
export function ApiErrors(...errors: Array<number | [number, string]>) {
  return applyDecorators(
    ...errors.map((entry) => {
      const [status, description] = Array.isArray(entry)
        ? entry
        : [entry, ERROR_DESCRIPTIONS[entry]];
      return ApiResponse({ status, description: description ?? 'Error', type: ErrorEnvelopeDto });
    }),
  );
}

/** Documents a `{data: [...], has_more}` list of `item`. */
export function ApiPage(item: Type<unknown>, description = 'One page of the list') {
  return applyDecorators(
    ApiExtraModels(item),
    ApiResponse({
      status: 200,
      description,
      schema: {
        type: 'object',
        required: ['data', 'has_more'],
        properties: {
          data: { type: 'array', items: { $ref: getSchemaPath(item) } },
          has_more: { type: 'boolean' },
        },
      },
    }),
  );
}
