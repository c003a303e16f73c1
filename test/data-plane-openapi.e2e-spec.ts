import { createTestApp, TestApp } from './support/test-app';

describe('OpenAPI of the data plane', () => {
  let t: TestApp;
  let document: {
    paths: Record<string, Record<string, { responses: object; security?: unknown }>>;
    components: { schemas: Record<string, { properties: Record<string, unknown> }> };
  };

  beforeAll(async () => {
    t = await createTestApp();
    document = (await t.http().get('/v1/openapi.json')).body;
  });
  afterAll(() => t.close());

  it('documents both 201 and 200 for POST /v1/end-users, and 409', () => {
    const create = document.paths['/v1/end-users'].post;
    expect(Object.keys(create.responses)).toEqual(
      expect.arrayContaining(['200', '201', '400', '401', '403', '409']),
    );
    expect(create.security).toEqual([{ bearer: [] }]);
  });

  it('declares metadata as a free-form object', () => {
    for (const name of ['CreateEndUserDto', 'UpdateEndUserDto', 'EndUserDto']) {
      expect(document.components.schemas[name].properties.metadata).toMatchObject({
        type: 'object',
        additionalProperties: true,
      });
    }
  });

  it('describes every data-plane operation with its success and error responses', () => {
    const expected: Array<[string, string, string[]]> = [
      ['/v1/end-users', 'get', ['200', '400', '401', '403']],
      ['/v1/end-users/{user_id}', 'get', ['200', '404']],
      ['/v1/end-users/{user_id}', 'patch', ['200', '404', '409']],
      ['/v1/end-users/{user_id}', 'delete', ['202', '404']],
      ['/v1/end-users/{user_id}/export', 'get', ['200', '404']],
      ['/v1/end-users/{user_id}/model', 'get', ['200', '404']],
      ['/v1/end-users/import', 'post', ['201', '400', '401', '403', '409', '413', '415']],
      ['/v1/respond', 'post', ['200', '400', '404', '409']],
      ['/v1/personalities/catalog', 'get', ['200']],
      ['/v1/personalities/from-catalog', 'post', ['201', '404']],
      ['/v1/personalities', 'get', ['200']],
      ['/v1/personalities/{id}', 'get', ['200', '404']],
      ['/v1/personalities/{id}', 'patch', ['200', '400', '404']],
      ['/v1/personalities/{id}', 'delete', ['204', '404']],
      ['/v1/usage/active-relationships', 'get', ['200', '400']],
      ['/v1/usage/active-relationships/items', 'get', ['200', '400']],
      ['/v1/formats/pmf-v1.schema.json', 'get', ['200']],
    ];
    for (const [path, method, statuses] of expected) {
      const operation = document.paths[path]?.[method];
      expect({ path, method, found: Boolean(operation) }).toEqual({ path, method, found: true });
      expect(Object.keys(operation.responses)).toEqual(
        expect.arrayContaining([...statuses, '500']),
      );
    }
    // The import takes a PMF v1 document and says where its schema is.
    const importing = document.paths['/v1/end-users/import'].post as unknown as {
      requestBody: { content: Record<string, { schema: object }>; description: string };
      security: unknown;
    };
    expect(importing.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/PmfDocumentDto',
    });
    const pmf = document.components.schemas.PmfDocumentDto as unknown as {
      properties: Record<string, unknown>;
      required: string[];
    };
    expect(Object.keys(pmf.properties)).toContain('facts');
    expect(pmf.required).not.toContain('facts');
    expect(importing.requestBody.description).toContain('/v1/formats/pmf-v1.schema.json');
    expect(importing.security).toEqual([{ bearer: [] }]);
    // Public: declared with no security requirement.
    expect(document.paths['/v1/formats/pmf-v1.schema.json'].get.security).toEqual([]);
  });
});
