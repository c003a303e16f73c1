import { randomUUID } from 'node:crypto';
import { expectError } from './support/assertions';
import { clonePersonality } from './support/data-plane';
import { createApiKey, signUp } from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';

/**
 * Tools (contract §26): a personality's tool definitions, validated and stored.
 */

interface Tenant {
  organizationId: string;
  auth: string;
}

async function tenant(t: TestApp): Promise<Tenant> {
  const owner = await signUp(t);
  const key = await createApiKey(t, owner.accessToken, ['admin']);
  return { organizationId: owner.organizationId, auth: `Bearer ${key}` };
}

async function createEndpoint(t: TestApp, owner: Tenant, url: string): Promise<string> {
  const response = await t
    .http()
    .post('/v1/webhook-endpoints')
    .set('Authorization', owner.auth)
    .send({ url, events: ['end_user.deleted'] });
  expect({ status: response.status, body: response.body }).toMatchObject({ status: 201 });
  return response.body.id as string;
}

const lookupOrder = {
  name: 'lookup_order',
  description: "Looks up one of the user's orders",
  parameters: {
    type: 'object',
    properties: { order_id: { type: 'string' } },
    required: ['order_id'],
    additionalProperties: false,
  },
  execution: 'client',
};

describe('Tools (contract §26)', () => {
  let t: TestApp;
  let owner: Tenant;
  let endpointId: string;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
    owner = await tenant(t);
    endpointId = await createEndpoint(t, owner, 'http://127.0.0.1:9/tools');
  });
  afterAll(() => t.close());

  describe('definitions on personalities', () => {
    it('are none by default, set on create, replaced by PATCH and shown by GET', async () => {
      const plain = await clonePersonality(t, owner.auth);
      const shown = await t
        .http()
        .get(`/v1/personalities/${plain}`)
        .set('Authorization', owner.auth);
      expect(shown.body.tools).toEqual([]);

      const webhookTool = {
        name: 'book-slot',
        description: 'Books a slot',
        parameters: { type: 'object', properties: { at: { type: 'string' } } },
        execution: 'webhook',
        endpoint_id: endpointId,
      };
      const created = await t
        .http()
        .post('/v1/personalities/from-catalog')
        .set('Authorization', owner.auth)
        .send({ slug: 'sage-mentor', tools: [lookupOrder, webhookTool] });
      expect(created.status).toBe(201);
      expect(created.body.tools).toEqual([lookupOrder, { ...webhookTool, timeout_ms: 10000 }]);

      const patched = await t
        .http()
        .patch(`/v1/personalities/${created.body.id}`)
        .set('Authorization', owner.auth)
        .send({ tools: [{ ...webhookTool, timeout_ms: 250 }] });
      expect(patched.status).toBe(200);
      const got = await t
        .http()
        .get(`/v1/personalities/${created.body.id}`)
        .set('Authorization', owner.auth);
      expect(got.body.tools).toEqual([{ ...webhookTool, timeout_ms: 250 }]);
    });

    it('refuses invalid definitions naming the field', async () => {
      const id = await clonePersonality(t, owner.auth);
      const cases: Array<[unknown, string]> = [
        [
          [lookupOrder, { ...lookupOrder, name: 'other', parameters: { type: 'array' } }],
          'tools/1/parameters',
        ],
        [[{ ...lookupOrder, parameters: { type: 'object', properties: 3 } }], 'tools/0/parameters'],
        [[lookupOrder, lookupOrder], 'tools/1/name'],
        [[{ ...lookupOrder, name: 'has space' }], 'tools/0/name'],
        [[{ ...lookupOrder, description: '' }], 'tools/0/description'],
        [[{ ...lookupOrder, execution: 'server' }], 'tools/0/execution'],
        [
          [{ ...lookupOrder, execution: 'webhook', endpoint_id: randomUUID() }],
          'tools/0/endpoint_id',
        ],
        [
          [{ ...lookupOrder, execution: 'webhook', endpoint_id: endpointId, timeout_ms: 50 }],
          'tools/0/timeout_ms',
        ],
        [Array.from({ length: 33 }, (_, i) => ({ ...lookupOrder, name: `t${i}` })), 'tools'],
        [['not an object'], 'tools'],
      ];
      for (const [tools, field] of cases) {
        const response = await t
          .http()
          .patch(`/v1/personalities/${id}`)
          .set('Authorization', owner.auth)
          .send({ tools });
        expectError(response, 400, 'validation_failed');
        expect(response.body.error.details).toContainEqual(expect.objectContaining({ field }));
      }
      const created = await t
        .http()
        .post('/v1/personalities/from-catalog')
        .set('Authorization', owner.auth)
        .send({ slug: 'sage-mentor', tools: [lookupOrder, lookupOrder] });
      expectError(created, 400, 'validation_failed');
      const got = await t.http().get(`/v1/personalities/${id}`).set('Authorization', owner.auth);
      expect(got.body.tools).toEqual([]);
    });

    it("refuses another organization's webhook endpoint", async () => {
      const other = await tenant(t);
      const id = await clonePersonality(t, other.auth);
      const response = await t
        .http()
        .patch(`/v1/personalities/${id}`)
        .set('Authorization', other.auth)
        .send({ tools: [{ ...lookupOrder, execution: 'webhook', endpoint_id: endpointId }] });
      expectError(response, 400, 'validation_failed');
      expect(response.body.error.details).toEqual([
        { field: 'tools/0/endpoint_id', problem: 'must be a webhook endpoint of the organization' },
      ]);
    });
  });
});
