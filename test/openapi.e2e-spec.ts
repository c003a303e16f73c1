import { createTestApp, TestApp } from './support/test-app';

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

    // Every /v1 operation documents its error responses with the envelope.
    for (const [path, item] of Object.entries<
      Record<string, { responses: Record<string, unknown> }>
    >(document.paths)) {
      if (!path.startsWith('/v1')) continue;
      for (const operation of Object.values(item)) {
        expect(operation.responses['500']).toBeDefined();
      }
    }
  });

  it('serves the UI at /docs', async () => {
    const response = await t.http().get('/docs').redirects(1);
    expect(response.status).toBe(200);
    expect(response.text).toContain('swagger');
  });
});
