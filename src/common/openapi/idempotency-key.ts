import type { OpenAPIObject } from '@nestjs/swagger';
import { IDEMPOTENT_REPLAYED_HEADER } from '../http/idempotency-key';

type Operation = {
  parameters?: Array<{ in?: string; name?: string; $ref?: string }>;
  responses: Record<string, { description?: string; content?: unknown; headers?: unknown }>;
  security?: unknown[];
};

const ENVELOPE = {
  'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelopeDto' } },
};

const isKeyHeader = (parameter: { in?: string; name?: string }) =>
  parameter.in === 'header' && parameter.name?.toLowerCase() === 'idempotency-key';

/**
 * Completes the operations that declare `Idempotency-Key` (the @AcceptsIdempotencyKey()
 * decorator does): the 409 of a request still in progress, added to any 409 the operation has,
 * and the `Idempotent-Replayed` header on its successful answers. Public operations check the
 * header and ignore it (docs/decisions.md), so their documents do not offer it.
 */
export function describeIdempotencyKey(document: OpenAPIObject): void {
  for (const pathItem of Object.values(document.paths)) {
    const operation = (pathItem as Record<string, Operation | undefined>).post;
    if (!operation?.parameters?.some(isKeyHeader)) continue;
    const { responses } = operation;
    if (!operation.security?.length) {
      operation.parameters = operation.parameters.filter((parameter) => !isKeyHeader(parameter));
      delete responses['422'];
      continue;
    }
    const conflict =
      'A request with the same Idempotency-Key is still being processed (`idempotency_key_in_progress`, with Retry-After)';
    const existing = responses['409'];
    if (existing) existing.description = `${existing.description ?? 'Conflict'}; or: ${conflict}`;
    else responses['409'] = { description: conflict, content: ENVELOPE };
    responses['409'].headers = {
      ...(responses['409'].headers as object | undefined),
      'Retry-After': { $ref: '#/components/headers/Retry-After' },
    };
    for (const [status, response] of Object.entries(responses)) {
      if (!status.startsWith('2')) continue;
      response.headers = {
        ...(response.headers as object | undefined),
        [IDEMPOTENT_REPLAYED_HEADER]: {
          $ref: `#/components/headers/${IDEMPOTENT_REPLAYED_HEADER}`,
        },
      };
    }
  }
}
