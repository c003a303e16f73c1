import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { before, describe, it } from 'node:test';
import { PersonalityApiError } from '@personality-api/client';
import { newPersonality, newTenant, type Tenant } from './support.js';

describe('paginate', () => {
  let tenant: Tenant;
  /** GET requests the client sent, by path. */
  let pages: string[];
  let counted: Tenant['api'];
  before(async () => {
    tenant = await newTenant();
    pages = [];
    counted = tenant.withFetch((request) => {
      if (request.method === 'GET') pages.push(new URL(request.url).pathname);
      return fetch(request);
    });
  });

  it('walks every end user, page after page, by user_id', async () => {
    const ids = ['u-1', 'u-2', 'u-3', 'u-4', 'u-5', 'u-6', 'u-7'];
    for (const user_id of ids) await tenant.api.POST('/v1/end-users', { body: { user_id } });
    pages.length = 0;
    const seen: string[] = [];
    for await (const user of counted.paginate('/v1/end-users', { query: { limit: 3 } })) {
      seen.push(user.user_id);
    }
    assert.deepEqual(seen, ids);
    assert.equal(pages.length, 3);
    // starting_after as the first cursor, as on a plain call
    const rest: string[] = [];
    for await (const user of counted.paginate('/v1/end-users', {
      query: { limit: 2, starting_after: 'u-4' },
    })) {
      rest.push(user.user_id);
    }
    assert.deepEqual(rest, ['u-5', 'u-6', 'u-7']);
  });

  it('walks a list under a path parameter by id (webhook deliveries), and personalities', async () => {
    const receiver = createServer((_request, response) => response.writeHead(204).end());
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = receiver.address() as AddressInfo;
      const endpoint = await tenant.api.POST('/v1/webhook-endpoints', {
        body: { url: `http://127.0.0.1:${port}/hooks`, events: ['end_user.deleted'] },
      });
      const id = endpoint.data!.id;
      for (let ping = 0; ping < 5; ping++) {
        await tenant.api.POST('/v1/webhook-endpoints/{id}/test', { params: { path: { id } } });
      }
      const deliveries: string[] = [];
      for await (const delivery of tenant.api.paginate('/v1/webhook-endpoints/{id}/deliveries', {
        path: { id },
        query: { limit: 2 },
      })) {
        assert.equal(delivery.event_type, 'ping');
        deliveries.push(delivery.id);
      }
      assert.equal(deliveries.length, 5);
      assert.equal(new Set(deliveries).size, 5);
    } finally {
      receiver.closeAllConnections();
      receiver.close();
    }

    const personalityId = await newPersonality(tenant.api);
    await newPersonality(tenant.api);
    await newPersonality(tenant.api);
    const personalities: string[] = [];
    for await (const personality of tenant.api.paginate('/v1/personalities', {
      query: { limit: 2 },
    })) {
      personalities.push(personality.id);
    }
    assert.equal(personalities.length, 3);
    assert.equal(personalities[0], personalityId);
  });

  it('walks the memories of an end user, by id', async () => {
    const personalityId = await newPersonality(tenant.api);
    for (const message of ['one', 'two', 'three', 'four', 'five', 'six']) {
      await tenant.api.respond({ personality_id: personalityId, user_id: 'talker', message });
    }
    const memories: string[] = [];
    for await (const memory of tenant.api.paginate('/v1/end-users/{user_id}/memories', {
      path: { user_id: 'talker' },
      query: { limit: 5 },
    })) {
      memories.push(memory.id);
    }
    assert.equal(memories.length, 12);
    assert.deepEqual(
      memories,
      [...memories].sort((a, b) => Number(b) - Number(a)),
    );
  });

  it('an empty list yields nothing; a refused page throws PersonalityApiError', async () => {
    const other = await newTenant();
    let count = 0;
    for await (const _ of other.api.paginate('/v1/webhook-endpoints')) count++;
    assert.equal(count, 0);
    await assert.rejects(
      async () => {
        for await (const _ of tenant.api.paginate('/v1/end-users/{user_id}/memories', {
          path: { user_id: 'nobody-here' },
        }));
      },
      (error: unknown) => error instanceof PersonalityApiError && error.code === 'not_found',
    );
  });
});
