import Ajv from 'ajv';
import { expectError } from './support/assertions';
import { createTestApp, TestApp } from './support/test-app';
import { DOCS_CSP } from '../src/common/openapi/docs-headers';

describe('OpenAPI', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('serves the document with schemas, error responses and security', async () => {
    const response = await t.http().get('/v1/openapi.json');
    expect(response.status).toBe(200);
    const document = response.body;
    expect(document.openapi).toMatch(/^3\./);
    expect(document.components.securitySchemes.bearer).toMatchObject({
      type: 'http',
      scheme: 'bearer',
    });
    expect(document.components.schemas.ErrorEnvelopeDto).toBeDefined();

    const changelog = document.paths['/v1/vocabularies/emotions/changelog'].get;
    expect(changelog.responses['200']).toBeDefined();
    expect(changelog.responses['429'].content['application/json'].schema.$ref).toBe(
      '#/components/schemas/ErrorEnvelopeDto',
    );
    expect(changelog.responses['200'].headers['X-Request-Id']).toBeDefined();
    const parameters = changelog.parameters
      .map((parameter: { name: string }) => parameter.name)
      .sort();
    expect(parameters).toEqual(['limit', 'starting_after']);

    const version = document.paths['/v1/vocabularies/emotions/{version}'].get;
    expect(version.responses['404']).toBeDefined();
    const schema = document.components.schemas.VocabularyVersionDto;
    expect(schema.properties.emotions).toBeDefined();

    // Every /v1 operation documents its error responses with the envelope, 400 included: any
    // answers it to a URL that is not percent-encoded UTF-8 (found by review: 21 did not say so).
    for (const [path, item] of Object.entries<
      Record<string, { responses: Record<string, unknown> }>
    >(document.paths)) {
      if (!path.startsWith('/v1')) continue;
      for (const operation of Object.values(item)) {
        expect(operation.responses['500']).toBeDefined();
        expect([path, operation.responses['400']]).toEqual([path, expect.anything()]);
      }
    }
    expectError(await t.http().get('/v1/vocabularies/emotions?x=%ZZ'), 400, 'validation_failed');
  });

  it('admits the nulls the service answers: a nullable object is the object or null (review)', async () => {
    const document = (await t.http().get('/v1/openapi.json')).body;
    // Ajv reads OpenAPI's `nullable`, not 3.0's boolean `exclusiveMinimum` (JSON Schema's is
    // the bound); the components ride along for the $refs.
    const asJsonSchema = (node: unknown): unknown => {
      if (Array.isArray(node)) return node.map(asJsonSchema);
      if (node === null || typeof node !== 'object') return node;
      const { exclusiveMinimum, minimum, ...rest } = node as Record<string, unknown>;
      const converted = Object.fromEntries(
        Object.entries(rest).map(([key, value]) => [key, asJsonSchema(value)]),
      );
      if (exclusiveMinimum === true) return { ...converted, exclusiveMinimum: minimum };
      return minimum === undefined ? converted : { ...converted, minimum };
    };
    const ajv = new Ajv({ strict: false, allErrors: true });
    const limits = ajv.compile(
      asJsonSchema({
        ...document.components.schemas.LimitsDto,
        components: document.components,
      }) as object,
    );
    const none = {
      monthly_token_budget: null,
      end_user_daily_token_budget: null,
      end_user_rate_limit: null,
    };
    expect(limits(none) ? [] : limits.errors).toEqual([]);
    expect(limits({ ...none, end_user_rate_limit: { rps: 1, burst: 2 } })).toBe(true);
    expect(limits({ ...none, end_user_rate_limit: 'fast' })).toBe(false);
    // A POST that takes no body is still refused one: 413 and 415 say so (review).
    const test = document.paths['/v1/webhook-endpoints/{id}/test'].post.responses;
    expect(Object.keys(test)).toEqual(expect.arrayContaining(['413', '415']));
  });

  it('declares the public operations with security: [] and names a server', async () => {
    const document = (await t.http().get('/v1/openapi.json')).body;
    expect(document.servers).toEqual([expect.objectContaining({ url: expect.any(String) })]);

    const publicOperations: string[] = [];
    for (const [path, item] of Object.entries<Record<string, { security?: unknown[] }>>(
      document.paths,
    )) {
      for (const [method, operation] of Object.entries(item)) {
        // Every operation says who may call it: the bearer scheme, or nobody needed.
        expect(operation.security).toBeDefined();
        if (operation.security?.length === 0) publicOperations.push(`${method} ${path}`);
        else expect(operation.security).toEqual([{ bearer: [] }]);
      }
    }
    // The contract's public endpoints (§3), and only those.
    expect(publicOperations.sort()).toEqual(
      [
        'get /health/live',
        'get /health/ready',
        'get /v1/formats/pmf-v1.schema.json',
        'get /v1/vocabularies/emotions',
        'get /v1/vocabularies/emotions/changelog',
        'get /v1/vocabularies/emotions/{version}',
        'post /v1/auth/forgot-password',
        'post /v1/auth/login',
        'post /v1/auth/reset-password',
        'post /v1/auth/signup',
        'post /v1/auth/sso/login',
        // Contract §25: the link mailed at sign-up.
        'post /v1/auth/verify-email',
        'post /v1/billing/webhooks',
      ].sort(),
    );
  });

  it('serves the UI at /docs, its page and files never framed elsewhere (review)', async () => {
    const response = await t.http().get('/docs').redirects(1);
    expect(response.status).toBe(200);
    expect(response.text).toContain('swagger');
    for (const path of ['/docs', '/docs/', '/DOCS/swagger-ui-init.js', '/docs/missing']) {
      const { headers } = await t.http().get(path);
      expect({ path, csp: headers['content-security-policy'] }).toEqual({ path, csp: DOCS_CSP });
      expect(headers['x-frame-options']).toBe('DENY');
    }
  });
});
