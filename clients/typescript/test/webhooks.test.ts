import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  verifyWebhook,
  WebhookVerificationError,
  type WebhookEvent,
} from '@personality-api/client';
import { eventually, newTenant, uniqueUserId, type Tenant } from './support.js';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A customer's endpoint on loopback: the service delivers there because the harness runs it with
 * WEBHOOK_ALLOW_PRIVATE_URLS=true (docs/webhooks.md).
 */
describe('verifyWebhook with webhooks the service signed', () => {
  let tenant: Tenant;
  let server: Server;
  const received: Received[] = [];
  let secret: string;
  let endpointId: string;

  before(async () => {
    tenant = await newTenant();
    server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const created = await tenant.api.POST('/v1/webhook-endpoints', {
      body: { url: `http://127.0.0.1:${port}/hooks`, events: ['end_user.created'] },
    });
    assert.equal(created.response.status, 201, JSON.stringify(created.error));
    assert.match(created.data?.secret ?? '', /^whsec_/);
    secret = created.data!.secret!;
    endpointId = created.data!.id;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const delivery = (type: string, match: (event: WebhookEvent) => boolean = () => true) =>
    eventually(() =>
      received.find((hook) => {
        const event = JSON.parse(hook.body) as WebhookEvent;
        return event.type === type && match(event);
      }),
    );

  it('answers the typed event of a real delivery (end_user.created)', async () => {
    const userId = uniqueUserId('hooked');
    await tenant.api.POST('/v1/end-users', { body: { user_id: userId } });
    const hook = await delivery('end_user.created', (event) =>
      JSON.stringify(event).includes(userId),
    );

    const event = verifyWebhook(hook.body, hook.headers, secret);
    if (event.type !== 'end_user.created') return assert.fail(`a ${event.type} event`);
    assert.equal(event.id, hook.headers['webhook-id']);
    assert.match(event.id, /^evt_/);
    assert.equal(event.organization_id, tenant.organizationId);
    assert.equal(event.data.user_id, userId);
    assert.ok(!Number.isNaN(Date.parse(event.data.created_at)));
    // The raw body as bytes, and fetch's Headers, work as well.
    const headers = new Headers();
    for (const [name, value] of Object.entries(hook.headers)) {
      if (typeof value === 'string') headers.set(name, value);
    }
    assert.deepEqual(verifyWebhook(new TextEncoder().encode(hook.body), headers, secret), event);
  });

  it('throws WebhookVerificationError for a tampered body, another secret or missing headers', async () => {
    await tenant.api.POST('/v1/webhook-endpoints/{id}/test', {
      params: { path: { id: endpointId } },
    });
    const hook = await delivery('ping');
    const ping = verifyWebhook(hook.body, hook.headers, secret);
    if (ping.type !== 'ping') return assert.fail(`a ${ping.type} event`);
    assert.equal(ping.data.webhook_endpoint_id, endpointId);

    const tampered = hook.body.replace(
      tenant.organizationId,
      '00000000-0000-0000-0000-000000000000',
    );
    assert.notEqual(tampered, hook.body);
    assert.throws(() => verifyWebhook(tampered, hook.headers, secret), WebhookVerificationError);
    const otherSecret = `whsec_${Buffer.from('another secret of 24 bytes!!').toString('base64')}`;
    assert.throws(
      () => verifyWebhook(hook.body, hook.headers, otherSecret),
      WebhookVerificationError,
    );
    assert.throws(() => verifyWebhook(hook.body, {}, secret), WebhookVerificationError);
  });
});
