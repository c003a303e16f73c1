import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { BEARER_AUTH } from '../auth/auth.decorators';
import { ErrorEnvelopeDto } from '../errors/error-envelope';
import { IDEMPOTENT_REPLAYED_HEADER } from '../http/idempotency-key';
import { describeIdempotencyKey } from './idempotency-key';
import { addUnionSchemas } from './union-schemas';
import { METHODS_WITH_BODY } from '../http/json-body.middleware';

/**
 * Response headers, declared once under components/headers and referred to by every response
 * (written out in each, they were most of the document, and of the types made from it).
 */
export const HEADERS = {
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
    description:
      'ISO 8601 time at which the bucket is full again (an hour from now at most: a bucket unused for an hour is full)',
    schema: { type: 'string' },
  },
  'Retry-After': {
    description:
      "Whole seconds to wait before retrying: until a rate-limit token is back, or the response's own wait (each response's description says which)",
    schema: { type: 'integer' },
  },
  [IDEMPOTENT_REPLAYED_HEADER]: {
    description:
      '`true` on a replay of the stored answer of an earlier request with the same Idempotency-Key',
    schema: { type: 'string', enum: ['true'] },
  },
};

export const headerRef = (name: keyof typeof HEADERS) => ({
  $ref: `#/components/headers/${name}`,
});

const COMMON_HEADERS = Object.fromEntries(
  (
    ['X-Request-Id', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'] as const
  ).map((name) => [name, headerRef(name)]),
);

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

/**
 * A property `{nullable: true, allOf: [{$ref}]}`, as @nestjs/swagger writes a nullable object,
 * admits no null under OpenAPI 3.0 (nullable widens only the schema's own `type`, and the `$ref`
 * refuses null): it becomes `oneOf` the object or null, which validators and the client's types
 * read alike (found by review: `rate_limit: null` failed the documented ApiKeyDto).
 */
function admitNullObjects(document: OpenAPIObject): void {
  for (const schema of Object.values(document.components?.schemas ?? {})) {
    const properties = (schema as { properties?: Record<string, Record<string, unknown>> })
      .properties;
    for (const [name, property] of Object.entries(properties ?? {})) {
      const allOf = property.allOf as unknown[] | undefined;
      if (property.nullable !== true || !allOf || allOf.length !== 1) continue;
      const { nullable: _nullable, type: _type, allOf: _allOf, ...rest } = property;
      properties![name] = {
        ...rest,
        oneOf: [allOf[0], { type: 'object', nullable: true, enum: [null] }],
      };
    }
  }
}

/** Every operation can be rate limited and can fail unexpectedly; say so once, here. */
function addCommonResponses(document: OpenAPIObject): void {
  const envelope = { $ref: '#/components/schemas/ErrorEnvelopeDto' };
  for (const [path, pathItem] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(pathItem as Record<string, unknown>)) {
      if (!operation || typeof operation !== 'object' || !('responses' in operation)) continue;
      const responses = (operation as { responses: Record<string, Record<string, unknown>> })
        .responses;
      const limited = (responses['429'] ??= {
        description: 'Rate limited (`rate_limited`); see Retry-After',
        headers: {},
        content: { 'application/json': { schema: envelope } },
      });
      // Every 429 says when to retry: rate_limited and too_many_streams alike.
      limited.headers = { 'Retry-After': headerRef('Retry-After'), ...(limited.headers ?? {}) };
      // Any /v1 route: a URL not percent-encoded UTF-8, a body where it takes none (§14).
      if (path.startsWith('/v1/'))
        responses['400'] ??= {
          description:
            'A URL that is not valid percent-encoded UTF-8, or a body sent to an endpoint that takes none (`validation_failed`)',
          content: { 'application/json': { schema: envelope } },
        };
      if (path.startsWith('/v1/')) {
        // Any operation that may be sent a body: the body parsers answer before the route's own
        // rules, also where the route takes none (a POST of an action: found by review).
        if ('requestBody' in operation || METHODS_WITH_BODY.has(method.toUpperCase())) {
          responses['413'] ??= {
            description: 'Body over its limit, 1 MiB unless said (`payload_too_large`)',
            content: { 'application/json': { schema: envelope } },
          };
          responses['415'] ??= {
            description: 'Body is not application/json (`unsupported_media_type`)',
            content: { 'application/json': { schema: envelope } },
          };
        }
        // Any /v1 route that reads the database (contract §29); see Retry-After.
        responses['503'] ??= {
          description:
            'The database is unavailable (`service_unavailable`) or too slow for this request (`database_timeout`); see Retry-After',
          headers: { 'Retry-After': headerRef('Retry-After') },
          content: { 'application/json': { schema: envelope } },
        };
      }
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
  (document.components ??= {}).headers = HEADERS;
  addUnionSchemas(document);
  admitNullObjects(document);
  addCommonResponses(document);
  describeIdempotencyKey(document);
  markPublicOperations(document);
  return document;
}

export const OPENAPI_DOCUMENT_PATH = '/v1/openapi.json';
export const OPENAPI_UI_PATH = '/docs';

/** Serves the document at OPENAPI_DOCUMENT_PATH and the UI at OPENAPI_UI_PATH. */
export function setupOpenApi(app: INestApplication): void {
  const document = buildOpenApiDocument(app);
  SwaggerModule.setup(OPENAPI_UI_PATH.slice(1), app, document, {
    jsonDocumentUrl: OPENAPI_DOCUMENT_PATH.slice(1),
    raw: ['json'],
    customSiteTitle: 'Personality API',
  });
}
