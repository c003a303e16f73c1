import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { BEARER_AUTH } from '../auth/auth.decorators';
import { ErrorEnvelopeDto } from '../errors/error-envelope';
import { describeIdempotencyKey } from './idempotency-key';

const COMMON_HEADERS = {
  'X-Request-Id': {
    description: 'ULID of this request, repeated in error bodies and logs',
    schema: { type: 'string' },
  },
  'X-RateLimit-Limit': {
    description: 'Refill rate of the bucket, requests per second',
    schema: { type: 'number' },
  },
  'X-RateLimit-Remaining': {
    description: 'Whole tokens left after this request',
    schema: { type: 'integer' },
  },
  'X-RateLimit-Reset': {
    description: 'ISO 8601 time at which the bucket is full again',
    schema: { type: 'string' },
  },
};

/**
 * An operation without a security requirement is one declared @Public(): the global guard
 * refuses routes that declare no access, and @Scopes()/@UserOnly() both add the bearer scheme.
 * Saying `security: []` outright tells readers and linters it is public on purpose.
 */
function markPublicOperations(document: OpenAPIObject): void {
  for (const pathItem of Object.values(document.paths)) {
    for (const operation of Object.values(pathItem as Record<string, unknown>)) {
      if (!operation || typeof operation !== 'object' || !('responses' in operation)) continue;
      const withSecurity = operation as { security?: unknown[] };
      withSecurity.security ??= [];
    }
  }
}

/** Every operation can be rate limited and can fail unexpectedly; say so once, here. */
function addCommonResponses(document: OpenAPIObject): void {
  const envelope = { $ref: '#/components/schemas/ErrorEnvelopeDto' };
  for (const pathItem of Object.values(document.paths)) {
    for (const operation of Object.values(pathItem as Record<string, unknown>)) {
      if (!operation || typeof operation !== 'object' || !('responses' in operation)) continue;
      const responses = (operation as { responses: Record<string, Record<string, unknown>> })
        .responses;
      responses['429'] ??= {
        description: 'Rate limited (`rate_limited`); see Retry-After',
        headers: {
          'Retry-After': {
            description: 'Seconds until a token is back',
            schema: { type: 'integer' },
          },
        },
        content: { 'application/json': { schema: envelope } },
      };
      responses['500'] ??= {
        description: 'Unexpected error (`internal_error`)',
        content: { 'application/json': { schema: envelope } },
      };
      for (const response of Object.values(responses)) {
        response.headers = { ...COMMON_HEADERS, ...(response.headers ?? {}) };
      }
    }
  }
}

export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Personality API')
    .setDescription(
      'End users, personalities, conversations, exports, identity, billing and usage. ' +
        'Errors use one envelope: `{"error": {status, code, message, request_id, details?}}`.',
    )
    .setVersion('1.0.0')
    // Relative: the API is on the host that serves this document, whatever its public name.
    .addServer('/', 'The host serving this document')
    .addBearerAuth(
      { type: 'http', scheme: 'bearer', description: 'An access token (JWT) or an API key (pk_…)' },
      BEARER_AUTH,
    )
    .build();
  const document = SwaggerModule.createDocument(app, config, { extraModels: [ErrorEnvelopeDto] });
  addCommonResponses(document);
  describeIdempotencyKey(document);
  markPublicOperations(document);
  return document;
}

/** Serves the document at /v1/openapi.json and the UI at /docs. */
export function setupOpenApi(app: INestApplication): void {
  const document = buildOpenApiDocument(app);
  SwaggerModule.setup('docs', app, document, {
    jsonDocumentUrl: 'v1/openapi.json',
    raw: ['json'],
    customSiteTitle: 'Personality API',
  });
}
