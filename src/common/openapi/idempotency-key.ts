import type { OpenAPIObject } from '@nestjs/swagger';
import { acceptsIdempotencyKey, IDEMPOTENT_REPLAYED_HEADER } from '../http/idempotency-key';

type Operation = {
  parameters?: Array<{ in?: string; name?: string; $ref?: string }>;
  responses: Record<string, { description?: string; content?: unknown; headers?: unknown }>;
  security?: unknown[];
};

const ENVELOPE = {
  'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelopeDto' } },
};

/**
 * Declares `Idempotency-Key` (contract §16, docs/idempotency.md) on every authenticated POST
 * under /v1 that accepts it, with its 409 and 422 answers. Public operations check the header
 * and ignore it, so it is not offered there; an operation that declares the header itself keeps
 * its own description.
 */
export function describeIdempotencyKey(document: OpenAPIObject): void {
  for (const [path, pathItem] of Object.entries(document.paths)) {
    const operation = (pathItem as Record<string, Operation | undefined>).post;
    if (!operation || !acceptsIdempotencyKey('POST', path) || !operation.security?.length) continue;
    const parameters = (operation.parameters ??= []);
    if (!parameters.some((p) => p.in === 'header' && p.name?.toLowerCase() === 'idempotency-key')) {
      parameters.push({
        in: 'header',
        name: 'Idempotency-Key',
        required: false,
        description:
          '1..255 printable ASCII characters. A retry with the same key and request gets the stored answer with `Idempotent-Replayed: true` (kept 24 hours, per organization; per user on user-only endpoints)',
        schema: { type: 'string', minLength: 1, maxLength: 255 },
      } as (typeof parameters)[number]);
    }
    const { responses } = operation;
    const conflict =
      'A request with the same Idempotency-Key is still being processed (`idempotency_key_in_progress`)';
    const existing = responses['409'];
    if (existing) existing.description = `${existing.description ?? 'Conflict'}; or: ${conflict}`;
    else responses['409'] = { description: conflict, content: ENVELOPE };
    responses['422'] ??= {
      description:
        'The Idempotency-Key was used with another method, path or body (`idempotency_key_reused`)',
      content: ENVELOPE,
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
