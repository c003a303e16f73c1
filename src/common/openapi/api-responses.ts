import { applyDecorators, Type } from '@nestjs/common';
import { ApiExtraModels, ApiProperty, ApiResponse } from '@nestjs/swagger';
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

const pages = new Map<Type<unknown>, Type<unknown>>();

/**
 * The named schema of a page of `item` (`EndUserDto` → `EndUserPageDto`), made once per item, so
 * that generated clients get one named type per list rather than an anonymous shape.
 */
function pageOf(item: Type<unknown>): Type<unknown> {
  let page = pages.get(item);
  if (!page) {
    class Page {
      @ApiProperty({ type: [item] })
      data: unknown[];

      @ApiProperty({ description: 'Whether items follow this page (ask with starting_after)' })
      has_more: boolean;
    }
    Object.defineProperty(Page, 'name', { value: `${item.name.replace(/Dto$/, '')}PageDto` });
    page = Page;
    pages.set(item, page);
  }
  return page;
}

/** Documents a `{data: [...], has_more}` list of `item`. */
export function ApiPage(item: Type<unknown>, description = 'One page of the list') {
  const page = pageOf(item);
  return applyDecorators(
    ApiExtraModels(item, page),
    ApiResponse({ status: 200, description, type: page }),
  );
}
