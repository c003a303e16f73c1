import { getDataSourceToken } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { Test } from 'supertest';
import { Webhook } from 'standardwebhooks';
import type { DataSource } from 'typeorm';
import { Database } from '../src/database/database';
import { Cte, sql, withEntries } from '../src/database/sql';
import { webhookEventStep } from '../src/webhooks/webhook-event.step';
import { WebhookEventsService } from '../src/webhooks/webhook-events.service';
import type { SubscribableEventType } from '../src/webhooks/webhook-event-types';
import {
  type ClaimedAttempt,
  type ClaimLimits,
  WebhooksRepository,
} from '../src/webhooks/webhooks.repository';
import { MetricsService } from '../src/metrics/metrics.service';
import { ErasureWorker } from '../src/end-users/erasure.worker';
import { Clock, ManualClock } from '../src/common/time/clock';
import { FailingEndpointsWorker } from '../src/webhooks/failing-endpoints.worker';
import { expectError } from './support/assertions';
import {
  createApiKey,
  invitationTokenOf,
  isInvitationMail,
  joinOrganization,
  signUp,
  signUpVerified,
} from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';
import { eventually } from './support/wait';
import { type CapturedMail, TestSmtpServer } from './support/smtp-server';
import { type ReceivedWebhook, WebhookReceiver } from './support/webhook-receiver';

/**
 * Outbound webhooks (contract §17), against a real receiver on loopback: signatures checked with
 * the `standardwebhooks` library a customer would use, retries, timeouts, the SSRF guard, two
 * instances sharing one outbox, and an instance that stops between the change and the delivery.
 */

// One secret for every app of this file: Passport keeps one global strategy per process.
const JWT_SECRET = `webhooks-e2e-${randomUUID()}`;
const FAST = {
  JWT_SECRET,
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  WEBHOOK_RETRY_BASE_MS: '200',
  WEBHOOK_MAX_ATTEMPTS: '3',
  WEBHOOK_TIMEOUT_MS: '1000',
  WEBHOOK_POLL_INTERVAL_MS: '50',
};
const ALL_EVENTS = ['end_user.created', 'end_user.deleted', 'api_key.revoked'];

interface Tenant {
  organizationId: string;
  accessToken: string;
  auth: string;
}

async function adminTenant(t: TestApp): Promise<Tenant> {
  const owner = await signUp(t);
  const key = await createApiKey(t, owner.accessToken, ['admin']);
  return {
    organizationId: owner.organizationId,
    accessToken: owner.accessToken,
    auth: `Bearer ${key}`,
  };
}

async function createEndpoint(
  t: TestApp,
  tenant: Tenant,
  url: string,
  events: string[] = ALL_EVENTS,
): Promise<{ id: string; secret: string }> {
  const response = await t
    .http()
    .post('/v1/webhook-endpoints')
    .set('Authorization', tenant.auth)
    .send({ url, events });
  if (response.status !== 201) {
    throw new Error(
      `endpoint creation failed: ${response.status} ${JSON.stringify(response.body)}`,
    );
  }
  return response.body as { id: string; secret: string };
}

/** What another module does: the change and its event in one transaction. */
function emit(
  t: TestApp,
  organizationId: string,
  type: SubscribableEventType,
  data: Record<string, unknown>,
): Promise<void> {
  const dataSource = t.app.get<DataSource>(getDataSourceToken());
  const events = t.app.get(WebhookEventsService);
  return dataSource.transaction((manager) => events.emit(manager, organizationId, type, data));
}

function verify(hook: ReceivedWebhook, secret: string): Record<string, unknown> {
  return new Webhook(secret).verify(hook.body, hook.headers as Record<string, string>) as Record<
    string,
    unknown
  >;
}

async function deliveries(t: TestApp, tenant: Tenant, endpointId: string) {
  const response = await t
    .http()
    .get(`/v1/webhook-endpoints/${endpointId}/deliveries`)
    .set('Authorization', tenant.auth);
  expect(response.status).toBe(200);
  return response.body.data as Array<Record<string, unknown>>;
}

/** Polls the deliveries list until `done` holds. */
function waitForDeliveries(
  t: TestApp,
  tenant: Tenant,
  endpointId: string,
  done: (attempts: Array<Record<string, unknown>>) => boolean,
  timeoutMs = 15_000,
) {
  let seen: unknown;
  return eventually(
    async () => {
      const attempts = await deliveries(t, tenant, endpointId);
      seen = attempts;
      return done(attempts) ? attempts : undefined;
    },
    () => `deliveries to settle: ${JSON.stringify(seen)}`,
    timeoutMs,
  );
}

/**
 * Waits until the endpoint has no attempt left to make (none pending): every attempt made has
 * reached the receiver and been recorded, and a failed one's retry would be pending. From then
 * on nothing more is sent to it until another event is written.
 */
async function quiet(t: TestApp, endpointId: string): Promise<void> {
  const dataSource = t.app.get<DataSource>(getDataSourceToken());
  await eventually(async () => {
    const [{ n }] = await dataSource.query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM webhook_delivery_attempts
        WHERE endpoint_id = $1 AND status = 'pending'`,
      [endpointId],
    );
    return n === 0 ? true : undefined;
  }, `no pending attempt for endpoint ${endpointId}`);
}

let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await new WebhookReceiver().start();
});
afterAll(() => receiver.stop());

describe('Webhook endpoints and deliveries (one instance, private URLs allowed)', () => {
  let t: TestApp;
  let tenant: Tenant;

  beforeAll(async () => {
    t = await createTestApp({ env: FAST });
    tenant = await adminTenant(t);
  });
  afterAll(() => t.close());

  it('creates an endpoint with a whsec_ secret shown once, then lists, gets, patches and deletes it', async () => {
    const url = receiver.url(`ok/crud-${randomUUID()}`);
    const created = await t
      .http()
      .post('/v1/webhook-endpoints')
      .set('Authorization', tenant.auth)
      .send({ url, events: ['end_user.deleted'], description: 'CRM sync' });
    expect(created.status).toBe(201);
    expect(created.headers['cache-control']).toBe('no-store');
    expect(created.body).toEqual({
      id: expect.any(String),
      url,
      events: ['end_user.deleted'],
      description: 'CRM sync',
      status: 'enabled',
      disabled_reason: null,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]+=*$/),
      created_at: expect.any(String),
    });
    expect(Buffer.from(created.body.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
    const { id, secret } = created.body;
    const shown = { ...created.body };
    delete shown.secret;

    const list = await t.http().get('/v1/webhook-endpoints').set('Authorization', tenant.auth);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: [shown], has_more: false });
    const one = await t.http().get(`/v1/webhook-endpoints/${id}`).set('Authorization', tenant.auth);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(shown);
    expect(JSON.stringify([list.body, one.body])).not.toContain(secret.slice(6));

    const patched = await t
      .http()
      .patch(`/v1/webhook-endpoints/${id}`)
      .set('Authorization', tenant.auth)
      .send({
        events: ['end_user.created', 'api_key.revoked'],
        description: null,
        status: 'disabled',
      });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({
      ...shown,
      events: ['end_user.created', 'api_key.revoked'],
      description: null,
      status: 'disabled',
    });
    const newUrl = receiver.url(`ok/crud2-${randomUUID()}`);
    const moved = await t
      .http()
      .patch(`/v1/webhook-endpoints/${id}`)
      .set('Authorization', tenant.auth)
      .send({ url: newUrl, status: 'enabled' });
    expect(moved.body).toMatchObject({ url: newUrl, status: 'enabled', description: null });

    const deleted = await t
      .http()
      .delete(`/v1/webhook-endpoints/${id}`)
      .set('Authorization', tenant.auth);
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    for (const response of [
      await t.http().get(`/v1/webhook-endpoints/${id}`).set('Authorization', tenant.auth),
      await t.http().delete(`/v1/webhook-endpoints/${id}`).set('Authorization', tenant.auth),
      await t.http().post(`/v1/webhook-endpoints/${id}/test`).set('Authorization', tenant.auth),
      await t
        .http()
        .get(`/v1/webhook-endpoints/${id}/deliveries`)
        .set('Authorization', tenant.auth),
    ]) {
      expectError(response, 404, 'not_found');
    }

    // The audit log has every change, without the secret.
    const newOrigin = new URL(newUrl).origin;
    const audit = await t.http().get('/v1/audit-events').set('Authorization', tenant.auth);
    const events = (
      audit.body.data as Array<{ action: string; target: { id: string }; details: unknown }>
    ).filter((event) => event.target.id === id);
    expect(events.map(({ action, details }) => ({ action, details }))).toEqual([
      {
        action: 'webhook_endpoint.deleted',
        details: { url: newOrigin, events: expect.any(Array) },
      },
      { action: 'webhook_endpoint.updated', details: { url: newOrigin, status: 'enabled' } },
      {
        action: 'webhook_endpoint.updated',
        details: {
          events: ['end_user.created', 'api_key.revoked'],
          description: null,
          status: 'disabled',
        },
      },
      { action: 'webhook_endpoint.created', details: expect.any(Object) },
    ]);
    expect(JSON.stringify(audit.body)).not.toContain(secret.slice(6));
    // Its URL by origin only: a receiver's credentials may sit in the path.
    expect(JSON.stringify(audit.body)).not.toContain('crud2-');
  });

  it('refuses invalid input with validation_failed', async () => {
    const post = (body: unknown) =>
      t
        .http()
        .post('/v1/webhook-endpoints')
        .set('Authorization', tenant.auth)
        .send(body as object);
    const url = receiver.url('ok/invalid');
    for (const body of [
      {},
      { url },
      { url, events: [] },
      { url, events: ['end_user.exploded'] },
      { url, events: ['ping', 'ping'] },
      { url, events: ['end_user.created', 'end_user.created'] },
      { url: 'ftp://example.com/hook', events: ['end_user.created'] },
      { url: '/relative', events: ['end_user.created'] },
      { url: 'https://user:pw@example.com/', events: ['end_user.created'] },
      { url: 'https://ex\r\nample.com/hook', events: ['end_user.created'] },
      { url: 42, events: ['end_user.created'] },
      { url, events: ['end_user.created'], description: 'x'.repeat(501) },
      { url, events: ['end_user.created'], secret: 'whsec_mine' },
    ]) {
      expectError(await post(body), 400, 'validation_failed');
    }
    // `ping` may be listed, as contract §17 lists it among the events (`test` sends it anyway).
    const pinged = await post({ url: receiver.url('ok/ping-listed'), events: ['ping'] });
    expect(pinged.status).toBe(201);
    expect(pinged.body.events).toEqual(['ping']);
    const { id } = await createEndpoint(t, tenant, url);
    for (const body of [{ status: 'paused' }, { events: [] }, { url: 'nope' }, { extra: 1 }]) {
      const response = await t
        .http()
        .patch(`/v1/webhook-endpoints/${id}`)
        .set('Authorization', tenant.auth)
        .send(body);
      expectError(response, 400, 'validation_failed');
    }
    // A body on the bodiless test route.
    const ping = await t
      .http()
      .post(`/v1/webhook-endpoints/${id}/test`)
      .set('Authorization', tenant.auth)
      .send({ type: 'end_user.created' });
    expectError(ping, 400, 'validation_failed');
    expectError(
      await t.http().get('/v1/webhook-endpoints/not-a-uuid').set('Authorization', tenant.auth),
      404,
      'not_found',
    );
  });

  it('needs the admin scope: 401 without a credential, 403 for read_write; an owner’s token works', async () => {
    const owner = await signUp(t);
    const readWrite = await createApiKey(t, owner.accessToken, ['read_write']);
    const calls = [
      () => t.http().get('/v1/webhook-endpoints'),
      () =>
        t
          .http()
          .post('/v1/webhook-endpoints')
          .send({ url: receiver.url('ok/x'), events: ['ping'] }),
      () => t.http().get(`/v1/webhook-endpoints/${randomUUID()}`),
      () => t.http().patch(`/v1/webhook-endpoints/${randomUUID()}`).send({}),
      () => t.http().delete(`/v1/webhook-endpoints/${randomUUID()}`),
      () => t.http().post(`/v1/webhook-endpoints/${randomUUID()}/test`),
      () => t.http().get(`/v1/webhook-endpoints/${randomUUID()}/deliveries`),
    ];
    for (const call of calls) {
      expectError(await call(), 401, 'unauthenticated');
      expectError(
        await call().set('Authorization', `Bearer ${readWrite}`),
        403,
        'insufficient_scope',
      );
    }
    const byToken = await t
      .http()
      .post('/v1/webhook-endpoints')
      .set('Authorization', `Bearer ${owner.accessToken}`)
      .send({ url: receiver.url('ok/by-token'), events: ['end_user.created'] });
    expect(byToken.status).toBe(201);
  });

  it("keeps organizations apart: another organization's endpoint is 404 everywhere", async () => {
    const other = await adminTenant(t);
    const { id } = await createEndpoint(t, tenant, receiver.url(`ok/isolated-${randomUUID()}`));
    const calls = [
      () => t.http().get(`/v1/webhook-endpoints/${id}`),
      () => t.http().patch(`/v1/webhook-endpoints/${id}`).send({ status: 'disabled' }),
      () => t.http().delete(`/v1/webhook-endpoints/${id}`),
      () => t.http().post(`/v1/webhook-endpoints/${id}/test`),
      () => t.http().get(`/v1/webhook-endpoints/${id}/deliveries`),
    ];
    for (const call of calls)
      expectError(await call().set('Authorization', other.auth), 404, 'not_found');
    const list = await t.http().get('/v1/webhook-endpoints').set('Authorization', other.auth);
    expect(list.body).toEqual({ data: [], has_more: false });
    // Still there, untouched, for its owner.
    const mine = await t
      .http()
      .get(`/v1/webhook-endpoints/${id}`)
      .set('Authorization', tenant.auth);
    expect(mine.body.status).toBe('enabled');
    // An event of the other organization never reaches it.
    const before = receiver.received.length;
    await emit(t, other.organizationId, 'end_user.created', { user_id: 'theirs' });
    // No endpoint of theirs subscribes: no event, so no attempt, was written at all.
    const written = await t.app
      .get<DataSource>(getDataSourceToken())
      .query<Array<{ n: number }>>(
        'SELECT count(*)::int AS n FROM webhook_events WHERE organization_id = $1',
        [other.organizationId],
      );
    expect(written[0].n).toBe(0);
    expect(receiver.received.slice(before).filter((hook) => hook.body.includes('theirs'))).toEqual(
      [],
    );
  });

  it('pages the endpoint list with limit and starting_after', async () => {
    const pager = await adminTenant(t);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await createEndpoint(t, pager, receiver.url(`ok/page-${i}`))).id);
    const first = await t
      .http()
      .get('/v1/webhook-endpoints?limit=2')
      .set('Authorization', pager.auth);
    expect(first.body.data.map((e: { id: string }) => e.id)).toEqual(ids.slice(0, 2));
    expect(first.body.has_more).toBe(true);
    const second = await t
      .http()
      .get(`/v1/webhook-endpoints?limit=2&starting_after=${ids[1]}`)
      .set('Authorization', pager.auth);
    expect(second.body).toEqual({
      data: [expect.objectContaining({ id: ids[2] })],
      has_more: false,
    });
  });

  it('caps an organization at 20 endpoints, even when creates race', async () => {
    const hoarder = await adminTenant(t);
    const attempts = await Promise.all(
      Array.from({ length: 26 }, (_, i) =>
        t
          .http()
          .post('/v1/webhook-endpoints')
          .set('Authorization', hoarder.auth)
          .send({ url: receiver.url(`ok/cap-${i}`), events: ['end_user.created'] }),
      ),
    );
    expect(attempts.filter((r) => r.status === 201)).toHaveLength(20);
    const refused = attempts.filter((r) => r.status !== 201);
    expect(refused).toHaveLength(6);
    for (const response of refused) expectError(response, 409, 'webhook_endpoint_limit');
    const stored = await t.app
      .get<DataSource>(getDataSourceToken())
      .query<Array<{ n: number }>>(
        'SELECT count(*)::int AS n FROM webhook_endpoints WHERE organization_id = $1',
        [hoarder.organizationId],
      );
    expect(stored[0].n).toBe(20);
    // Another organization is not affected, and deleting one makes room again.
    await createEndpoint(t, await adminTenant(t), receiver.url('ok/other-org'));
    const oneId = (attempts.find((r) => r.status === 201)!.body as { id: string }).id;
    await t
      .http()
      .delete(`/v1/webhook-endpoints/${oneId}`)
      .set('Authorization', hoarder.auth)
      .expect(204);
    await createEndpoint(t, hoarder, receiver.url('ok/cap-again'));
  });

  it('test sends a ping, signed so that standardwebhooks verifies it, and lists the attempt', async () => {
    const path = `ok/ping-${randomUUID()}`;
    const { id, secret } = await createEndpoint(t, tenant, receiver.url(path), [
      'end_user.deleted',
    ]);
    const sent = await t
      .http()
      .post(`/v1/webhook-endpoints/${id}/test`)
      .set('Authorization', tenant.auth);
    expect(sent.status).toBe(202);
    expect(sent.body).toEqual({ event_id: expect.stringMatching(/^evt_[0-9a-f]{32}$/) });
    await receiver.waitFor(() => receiver.at(`/${path}`).length === 1);
    const [hook] = receiver.at(`/${path}`);
    expect(hook.headers['content-type']).toBe('application/json');
    expect(hook.headers['webhook-id']).toBe(sent.body.event_id);
    const timestamp = Number(hook.headers['webhook-timestamp']);
    expect(Math.abs(timestamp - Date.now() / 1000)).toBeLessThan(30);
    expect(hook.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const payload = verify(hook, secret);
    expect(payload).toEqual({
      id: sent.body.event_id,
      type: 'ping',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      organization_id: tenant.organizationId,
      data: { webhook_endpoint_id: id },
    });
    // Another secret does not verify it.
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(
        hook.body,
        hook.headers as Record<string, string>,
      ),
    ).toThrow();

    const attempts = await waitForDeliveries(t, tenant, id, (a) => a[0]?.status === 'succeeded');
    expect(attempts).toEqual([
      {
        id: expect.any(String),
        event_id: sent.body.event_id,
        event_type: 'ping',
        attempt: 1,
        status: 'succeeded',
        response_status: 200,
        error: null,
        duration_ms: expect.any(Number),
        created_at: expect.any(String),
        next_attempt_at: null,
      },
    ]);
  });

  it('delivers the events an endpoint subscribes to, from the transaction of the change, and no others', async () => {
    const path = `ok/emit-${randomUUID()}`;
    const { id, secret } = await createEndpoint(t, tenant, receiver.url(path), [
      'end_user.created',
      'api_key.revoked',
    ]);
    await emit(t, tenant.organizationId, 'end_user.created', { user_id: 'u-1' });
    await emit(t, tenant.organizationId, 'personality.deleted', { personality_id: 'p-1' });
    await emit(t, tenant.organizationId, 'api_key.revoked', { api_key_id: 'k-1', name: 'ci' });
    // A transaction that rolls back leaves no event behind.
    const dataSource = t.app.get<DataSource>(getDataSourceToken());
    await expect(
      dataSource.transaction(async (manager) => {
        await t.app
          .get(WebhookEventsService)
          .emit(manager, tenant.organizationId, 'end_user.created', { user_id: 'rolled-back' });
        throw new Error('the change failed');
      }),
    ).rejects.toThrow('the change failed');
    // Data holding a secret is refused (and so is the change with it).
    await expect(
      emit(t, tenant.organizationId, 'api_key.revoked', { api_key_id: 'k-2', key: 'pk_live_x' }),
    ).rejects.toThrow(/must not hold a secret/);

    await receiver.waitFor(() => receiver.at(`/${path}`).length >= 2);
    await quiet(t, id);
    const payloads = receiver.at(`/${path}`).map((hook) => verify(hook, secret));
    expect(payloads.map((p) => [p.type, p.data]).sort()).toEqual([
      ['api_key.revoked', { api_key_id: 'k-1', name: 'ci' }],
      ['end_user.created', { user_id: 'u-1' }],
    ]);
  });

  it('the event step puts the events in the statement that makes the change: one per row, committed with it', async () => {
    const path = `ok/step-${randomUUID()}`;
    const { id: endpointId, secret } = await createEndpoint(t, tenant, receiver.url(path), [
      'personality.created',
    ]);
    const database = t.app.get(Database);
    const statement = (ids: string[], final = sql`SELECT count(*)::int AS n FROM created`) => {
      const created = new Cte(
        'created',
        sql`SELECT jsonb_build_object('personality_id', p) AS webhook_data
              FROM unnest(${ids}::text[]) AS p`,
        ['webhook_data'],
      );
      return withEntries(
        [
          created,
          webhookEventStep(created, {
            organizationId: tenant.organizationId,
            type: 'personality.created',
            at: new Date(),
          }),
        ],
        final,
      );
    };
    await database.rows(statement(['p-1', 'p-2']));
    // A statement that fails after its steps ran leaves no event. (The division reads the
    // inserted events, so it fails at execution, not while the statement is planned.)
    await expect(
      database.rows(
        statement(
          ['p-never'],
          sql`SELECT count(*)::int AS n FROM created
               WHERE (SELECT count(*) FROM created_webhook_event) / 0 = 1`,
        ),
      ),
    ).rejects.toThrow('division by zero');
    await receiver.waitFor(() => receiver.at(`/${path}`).length === 2);
    await quiet(t, endpointId);
    const ids = receiver.at(`/${path}`).map((hook) => verify(hook, secret).data);
    expect(ids).toHaveLength(2);
    expect(ids).toEqual(
      expect.arrayContaining([{ personality_id: 'p-1' }, { personality_id: 'p-2' }]),
    );
  });

  it('retries a 500 with exponential backoff, with the same event id, until a 2xx', async () => {
    const path = `flaky/2/retry-${randomUUID()}`;
    const { id, secret } = await createEndpoint(t, tenant, receiver.url(path));
    await emit(t, tenant.organizationId, 'end_user.deleted', { user_id: 'gone' });
    await receiver.waitFor(() => receiver.at(`/${path}`).length === 3, 15_000);
    const hooks = receiver.at(`/${path}`);
    expect(new Set(hooks.map((hook) => hook.headers['webhook-id'])).size).toBe(1);
    for (const hook of hooks) expect(verify(hook, secret).type).toBe('end_user.deleted');
    // Base 200 ms, doubled each time (a little scheduling slack below).
    expect(hooks[1].receivedAt - hooks[0].receivedAt).toBeGreaterThanOrEqual(190);
    expect(hooks[2].receivedAt - hooks[1].receivedAt).toBeGreaterThanOrEqual(390);

    const attempts = await waitForDeliveries(t, tenant, id, (a) => a[0]?.status === 'succeeded');
    expect(attempts.map((a) => [a.attempt, a.status, a.response_status])).toEqual([
      [3, 'succeeded', 200],
      [2, 'failed', 500],
      [1, 'failed', 500],
    ]);
    expect(new Set(attempts.map((a) => a.event_id))).toEqual(
      new Set([hooks[0].headers['webhook-id']]),
    );
    expect(attempts[1].error).toBe('answered 500');
    expect(attempts[1].next_attempt_at).toEqual(expect.any(String));
    expect(attempts[0].next_attempt_at).toBeNull();
  });

  it('gives up after WEBHOOK_MAX_ATTEMPTS: the last attempt is failed with no next one', async () => {
    const path = `fail/give-up-${randomUUID()}`;
    const { id } = await createEndpoint(t, tenant, receiver.url(path));
    await emit(t, tenant.organizationId, 'end_user.created', { user_id: 'x' });
    const attempts = await waitForDeliveries(
      t,
      tenant,
      id,
      (a) => a[0]?.attempt === 3 && a[0]?.status === 'failed',
    );
    expect(attempts.map((a) => [a.attempt, a.status, a.response_status])).toEqual([
      [3, 'failed', 500],
      [2, 'failed', 500],
      [1, 'failed', 500],
    ]);
    expect(attempts[0].next_attempt_at).toBeNull();
    await quiet(t, id);
    expect(receiver.at(`/${path}`)).toHaveLength(3);
  });

  it('fails an attempt that gets no answer within WEBHOOK_TIMEOUT_MS, and retries it', async () => {
    const path = `hang/timeout-${randomUUID()}`;
    const { id } = await createEndpoint(t, tenant, receiver.url(path));
    await emit(t, tenant.organizationId, 'end_user.created', { user_id: 'slow' });
    const attempts = await waitForDeliveries(t, tenant, id, (a) =>
      a.some((x) => x.status === 'failed'),
    );
    const failed = attempts.find((a) => a.status === 'failed')!;
    expect(failed).toMatchObject({
      attempt: 1,
      response_status: null,
      error: 'timed out after 1000 ms',
    });
    expect(failed.duration_ms).toBeGreaterThanOrEqual(990);
    expect(failed.duration_ms).toBeLessThan(3000);
    expect(attempts.some((a) => a.attempt === 2)).toBe(true);

    // A slow answer inside the timeout succeeds.
    const slow = `slow/300/in-time-${randomUUID()}`;
    const endpoint = await createEndpoint(t, tenant, receiver.url(slow));
    await emit(t, tenant.organizationId, 'end_user.created', { user_id: 'in-time' });
    const done = await waitForDeliveries(
      t,
      tenant,
      endpoint.id,
      (a) => a[0]?.status === 'succeeded',
    );
    expect(done[0].duration_ms).toBeGreaterThanOrEqual(290);
  });

  it('does not follow redirects: a 302 is a failed attempt', async () => {
    const path = `redirect/r-${randomUUID()}`;
    const { id } = await createEndpoint(t, tenant, receiver.url(path));
    await emit(t, tenant.organizationId, 'end_user.created', { user_id: 'r' });
    const attempts = await waitForDeliveries(t, tenant, id, (a) =>
      a.some((x) => x.status === 'failed'),
    );
    expect(attempts.find((a) => a.status === 'failed')).toMatchObject({
      response_status: 302,
      error: 'answered 302; redirects are not followed',
    });
    expect(receiver.at('/ok/redirected')).toEqual([]);
  });

  it('skips an endpoint deleted while an event is written, instead of failing the change', async () => {
    const racer = await adminTenant(t);
    const { id } = await createEndpoint(t, racer, receiver.url(`ok/deleted-${randomUUID()}`));
    const deleter = new Client({ connectionString: process.env.DATABASE_URL });
    await deleter.connect();
    try {
      await deleter.query('BEGIN');
      await deleter.query('DELETE FROM webhook_endpoints WHERE id = $1', [id]);
      const { rows: pids } = await deleter.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      // The change reads the endpoint as still there, then waits on the delete's row lock.
      const change = emit(t, racer.organizationId, 'end_user.created', { user_id: 'racing' });
      await eventually(async () => {
        const { rows } = await deleter.query(
          'SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))',
          [pids[0].pid],
        );
        return rows.length > 0 ? true : undefined;
      }, 'the change to wait on the delete');
      await deleter.query('COMMIT');
      await expect(change).resolves.toBeUndefined();
    } finally {
      await deleter.end();
    }
    const events = await t.app
      .get<DataSource>(getDataSourceToken())
      .query<Array<{ n: number }>>(
        'SELECT count(*)::int AS n FROM webhook_events WHERE organization_id = $1',
        [racer.organizationId],
      );
    expect(events[0].n).toBe(0);
  });

  it('sends nothing to a disabled endpoint (a ping is refused), and its pending retries end', async () => {
    const path = `fail/disabled-${randomUUID()}`;
    const { id } = await createEndpoint(t, tenant, receiver.url(path));
    // A retry is pending when the endpoint is disabled.
    await emit(t, tenant.organizationId, 'end_user.created', { user_id: 'd' });
    await receiver.waitFor(() => receiver.at(`/${path}`).length === 1);
    const disabled = await t
      .http()
      .patch(`/v1/webhook-endpoints/${id}`)
      .set('Authorization', tenant.auth)
      .send({ status: 'disabled' });
    expect(disabled.body.status).toBe('disabled');
    await emit(t, tenant.organizationId, 'end_user.created', { user_id: 'while-disabled' });
    expectError(
      await t.http().post(`/v1/webhook-endpoints/${id}/test`).set('Authorization', tenant.auth),
      409,
      'webhook_endpoint_disabled',
    );
    await quiet(t, id);
    expect(receiver.at(`/${path}`).length).toBeLessThanOrEqual(2); // at most the retry already in flight
    const attempts = await deliveries(t, tenant, id);
    expect(attempts.filter((a) => a.status === 'pending')).toEqual([]);
    // The event sent while disabled was queued for no attempt, so none can reach the receiver.
    const queued = await t.app.get<DataSource>(getDataSourceToken()).query<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM webhook_delivery_attempts a
           JOIN webhook_events e ON e.id = a.event_id
          WHERE a.endpoint_id = $1 AND e.data->>'user_id' = 'while-disabled'`,
      [id],
    );
    expect(queued[0].n).toBe(0);
    expect(
      receiver
        .at(`/${path}`)
        .map((hook) => hook.body)
        .join(),
    ).not.toContain('while-disabled');
  });

  it('reports pending attempts as the webhook_deliveries_pending gauge', async () => {
    const { id } = await createEndpoint(t, tenant, receiver.url(`hang/gauge-${randomUUID()}`));
    await emit(t, tenant.organizationId, 'end_user.created', { user_id: 'g' });
    const metrics = t.app.get(MetricsService);
    const text = await metrics.registry.metrics();
    const value = Number(/^webhook_deliveries_pending (\d+)$/m.exec(text)?.[1]);
    expect(value).toBeGreaterThanOrEqual(1);
    await t.http().delete(`/v1/webhook-endpoints/${id}`).set('Authorization', tenant.auth);
  });
});

describe('Events sent by the changes themselves (every event type of §17 but ping)', () => {
  let t: TestApp;
  let owner: Awaited<ReturnType<typeof signUp>>;
  let tenant: Tenant;
  let smtp: TestSmtpServer;

  beforeAll(async () => {
    smtp = await new TestSmtpServer().start();
    t = await createTestApp({
      env: {
        ...FAST,
        ERASURE_GRACE_SECONDS: '0',
        SMTP_URL: smtp.url,
        APP_PUBLIC_URL: 'https://app.example.test',
      },
    });
    owner = await signUpVerified(t, smtp);
    const key = await createApiKey(t, owner.accessToken, ['admin']);
    tenant = {
      organizationId: owner.organizationId,
      accessToken: owner.accessToken,
      auth: `Bearer ${key}`,
    };
  });
  afterAll(async () => {
    await t.close();
    await smtp.stop();
  });

  it('end users, personalities, API keys, members and erasures each send their event, signed', async () => {
    const path = `ok/changes-${randomUUID()}`;
    const { id: endpointId, secret } = await createEndpoint(t, tenant, receiver.url(path), [
      'end_user.created',
      'end_user.deleted',
      'personality.created',
      'personality.deleted',
      'api_key.created',
      'api_key.revoked',
      'member.added',
      'member.removed',
    ]);
    const http = () => t.http();
    const userId = `wh-user-${randomUUID()}`;
    const created = await http()
      .post('/v1/end-users')
      .set('Authorization', tenant.auth)
      .send({ user_id: userId });
    expect(created.status).toBe(201);
    // Asking again creates nothing, so it sends nothing.
    expect(
      (
        await http()
          .post('/v1/end-users')
          .set('Authorization', tenant.auth)
          .send({ user_id: userId })
      ).status,
    ).toBe(200);
    const personality = await http()
      .post('/v1/personalities/from-catalog')
      .set('Authorization', tenant.auth)
      .send({ slug: 'sage-mentor' });
    expect(personality.status).toBe(201);
    expect(
      (
        await http()
          .delete(`/v1/personalities/${personality.body.id}`)
          .set('Authorization', tenant.auth)
      ).status,
    ).toBe(204);
    const key = await http()
      .post('/v1/api-keys')
      .set('Authorization', tenant.auth)
      .send({ name: 'webhook spec', scopes: ['read'] });
    expect(key.status).toBe(201);
    expect(
      (await http().delete(`/v1/api-keys/${key.body.id}`).set('Authorization', tenant.auth)).status,
    ).toBe(204);

    // A colleague joins through an invitation, then is removed.
    const colleague = await signUp(t);
    const invitation = await http()
      .post(`/v1/organizations/${owner.organizationId}/invitations`)
      .set('Authorization', `Bearer ${owner.accessToken}`)
      .send({ email: colleague.email, role: 'member' });
    expect(invitation.status).toBe(201);
    const token = invitationTokenOf(await smtp.waitFor(colleague.email, 5_000, isInvitationMail));
    expect(
      (
        await http()
          .post('/v1/invitations/accept')
          .set('Authorization', `Bearer ${colleague.accessToken}`)
          .send({ token })
      ).status,
    ).toBe(200);
    expect(
      (
        await http()
          .delete(`/v1/organizations/${owner.organizationId}/members/${colleague.userId}`)
          .set('Authorization', `Bearer ${owner.accessToken}`)
      ).status,
    ).toBe(204);

    // The erasure's event comes when it has completed, not when it was asked for.
    expect(
      (await http().delete(`/v1/end-users/${userId}`).set('Authorization', tenant.auth)).status,
    ).toBe(202);
    await t.app.get(ErasureWorker).eraseDue();

    await receiver.waitFor(() => receiver.at(`/${path}`).length >= 8);
    await quiet(t, endpointId);
    const events = receiver.at(`/${path}`).map((hook) => verify(hook, secret));
    const byType = new Map(events.map((event) => [event.type as string, event]));
    expect([...byType.keys()].sort()).toEqual([
      'api_key.created',
      'api_key.revoked',
      'end_user.created',
      'end_user.deleted',
      'member.added',
      'member.removed',
      'personality.created',
      'personality.deleted',
    ]);
    expect(events).toHaveLength(8);
    for (const event of events) expect(event.organization_id).toBe(owner.organizationId);
    expect(byType.get('end_user.created')!.data).toMatchObject({ user_id: userId });
    expect(byType.get('end_user.deleted')!.data).toMatchObject({ user_id: userId });
    expect(byType.get('personality.created')!.data).toMatchObject({
      id: personality.body.id,
      source_slug: 'sage-mentor',
    });
    expect(byType.get('personality.deleted')!.data).toMatchObject({ id: personality.body.id });
    expect(byType.get('api_key.created')!.data).toEqual(
      expect.objectContaining({ id: key.body.id, name: 'webhook spec', scopes: ['read'] }),
    );
    expect(byType.get('api_key.created')!.data).not.toHaveProperty('key');
    expect(JSON.stringify(events)).not.toContain(key.body.key);
    expect(byType.get('api_key.revoked')!.data).toMatchObject({ id: key.body.id });
    expect(byType.get('member.added')!.data).toMatchObject({
      user_id: colleague.userId,
      role: 'member',
    });
    expect(byType.get('member.removed')!.data).toMatchObject({ user_id: colleague.userId });
    // Times as the API writes them (contract §1), the same instant the API answered.
    expect(byType.get('end_user.created')!.data).toMatchObject({
      created_at: created.body.created_at,
    });
    expect(byType.get('personality.created')!.data).toMatchObject({
      created_at: personality.body.created_at,
    });
    const times = events.flatMap((event) =>
      Object.entries(event.data as Record<string, unknown>).filter(
        ([name, value]) => name.endsWith('_at') && value !== null,
      ),
    );
    expect(times.map(([name]) => name).sort()).toEqual([
      'created_at',
      'created_at',
      'deleted_at',
      'revoked_at',
    ]);
    for (const [name, value] of times) {
      expect({ name, value }).toEqual({
        name,
        value: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      });
    }
  });
});

/**
 * Another tenant, with a healthy receiver, makes a change: how long after the change's answer
 * its event arrived (ms).
 */
async function lagOfAnotherTenant(t: TestApp, run: string): Promise<number> {
  const healthy = await adminTenant(t);
  await createEndpoint(t, healthy, receiver.url(`ok/${run}/healthy`), ['end_user.created']);
  const created = await t
    .http()
    .post('/v1/end-users')
    .set('Authorization', healthy.auth)
    .send({ user_id: 'quiet' });
  expect(created.status).toBe(201);
  const answeredAt = Date.now();
  await receiver.waitFor(
    () => receiver.at(`/ok/${run}/healthy`).length > 0,
    15_000,
    "the healthy tenant's event",
  );
  return receiver.at(`/ok/${run}/healthy`)[0].receivedAt - answeredAt;
}

describe('Fair delivery slots between organizations (§25)', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({
      env: {
        ...FAST,
        // Hanging endpoints hold their slot this long; no retries, so each attempt is made once.
        WEBHOOK_TIMEOUT_MS: '5000',
        WEBHOOK_MAX_ATTEMPTS: '1',
        WEBHOOK_POLL_INTERVAL_MS: '500',
      },
    });
  });
  afterAll(() => t.close());

  it("one organization's 20 hanging endpoints hold at most 8 slots (4 each): another organization's event arrives within 2 s of the change's answer", async () => {
    const run = randomUUID();
    const noisy = await adminTenant(t);
    const noisyEndpoints: string[] = [];
    for (let i = 0; i < 20; i++) {
      const { id } = await createEndpoint(t, noisy, receiver.url(`hang/${run}/${i}`), [
        'end_user.created',
      ]);
      noisyEndpoints.push(id);
    }
    // 40 changes × 20 endpoints: 800 attempts due at once.
    await Promise.all(
      Array.from({ length: 40 }, (_, n) =>
        t
          .http()
          .post('/v1/end-users')
          .set('Authorization', noisy.auth)
          .send({ user_id: `noisy-${n}` })
          .expect(201),
      ),
    );
    await receiver.waitFor(() => receiver.at(`/hang/${run}/`).length >= 8, 5_000, 'noisy attempts');
    const firstNoisy = Math.min(...receiver.at(`/hang/${run}/`).map((hook) => hook.receivedAt));

    expect(await lagOfAnotherTenant(t, run)).toBeLessThanOrEqual(2_000);

    // Before the first hanging attempts time out, no more than 8 of the organization's attempts
    // were made, and no more than 4 to one endpoint.
    const early = receiver
      .at(`/hang/${run}/`)
      .filter((hook) => hook.receivedAt < firstNoisy + 4_000);
    expect(early.length).toBeLessThanOrEqual(8);
    const perEndpoint = new Map<string, number>();
    for (const hook of early) perEndpoint.set(hook.path, (perEndpoint.get(hook.path) ?? 0) + 1);
    expect(Math.max(...perEndpoint.values())).toBeLessThanOrEqual(4);

    for (const id of noisyEndpoints) {
      await t.http().delete(`/v1/webhook-endpoints/${id}`).set('Authorization', noisy.auth);
    }
  }, 30_000);

  it('sends an attempt that waited for a slot to the endpoint as it is then: a new URL counts', async () => {
    const run = randomUUID();
    const tenant = await adminTenant(t);
    const { id } = await createEndpoint(t, tenant, receiver.url(`hang/${run}/old`), [
      'end_user.created',
    ]);
    for (let n = 0; n < 8; n++) {
      await t
        .http()
        .post('/v1/end-users')
        .set('Authorization', tenant.auth)
        .send({ user_id: `waiting-${n}` })
        .expect(201);
    }
    // Four in flight (the endpoint's cap), hanging; the others wait for their slots.
    await receiver.waitFor(() => receiver.at(`/hang/${run}/old`).length === 4, 5_000, 'four');
    await t
      .http()
      .patch(`/v1/webhook-endpoints/${id}`)
      .set('Authorization', tenant.auth)
      .send({ url: receiver.url(`ok/${run}/new`) })
      .expect(200);
    await receiver.waitFor(() => receiver.at(`/ok/${run}/new`).length === 4, 15_000, 'the rest');
    expect(receiver.at(`/hang/${run}/old`)).toHaveLength(4);
    await t.http().delete(`/v1/webhook-endpoints/${id}`).set('Authorization', tenant.auth);
  }, 30_000);
});

describe('Fair delivery slots between accounts', () => {
  let t: TestApp;
  /** The endpoints a test made, deleted after it with their attempts not yet made. */
  let made: Array<{ id: string; accessToken: string; organizationId: string }>;

  // An instance each: closing one ends the attempts it has in flight.
  beforeEach(async () => {
    made = [];
    t = await createTestApp({
      env: {
        ...FAST,
        // Four organizations' caps (8 each) would pass the instance's 24; two fit.
        WEBHOOK_CONCURRENCY: '24',
        WEBHOOK_TIMEOUT_MS: '5000',
        WEBHOOK_MAX_ATTEMPTS: '1',
        WEBHOOK_POLL_INTERVAL_MS: '500',
      },
    });
  });
  afterEach(async () => {
    for (const endpoint of made) {
      await t
        .http()
        .delete(`/v1/webhook-endpoints/${endpoint.id}`)
        .set('Authorization', `Bearer ${endpoint.accessToken}`)
        .set('X-Organization-Id', endpoint.organizationId)
        .expect(204);
    }
    await t.close();
  });

  /**
   * One user's organizations (the first their sign-up's), each with `hanging` endpoints that
   * never answer and 10 changes: 10 × `hanging` attempts due in each. Their ids.
   */
  async function hangingAccount(
    run: string,
    hanging: number[],
  ): Promise<Tenant & { ids: string[] }> {
    const maker = await adminTenant(t);
    const ids = [maker.organizationId];
    for (let o = 1; o < hanging.length; o++) {
      const made = await t
        .http()
        .post('/v1/organizations')
        .set('Authorization', `Bearer ${maker.accessToken}`)
        .send({ name: `account organization ${o}` });
      expect(made.status).toBe(201);
      ids.push(made.body.id as string);
    }
    for (const [o, organizationId] of ids.entries()) {
      const owner = (request: Test) =>
        request
          .set('Authorization', `Bearer ${maker.accessToken}`)
          .set('X-Organization-Id', organizationId);
      for (let i = 0; i < hanging[o]; i++) {
        const endpoint = await owner(t.http().post('/v1/webhook-endpoints'))
          .send({ url: receiver.url(`hang/${run}/${o}/${i}`), events: ['end_user.created'] })
          .expect(201);
        made.push({ id: endpoint.body.id, accessToken: maker.accessToken, organizationId });
      }
      for (let n = 0; hanging[o] > 0 && n < 10; n++) {
        await owner(t.http().post('/v1/end-users'))
          .send({ user_id: `hanging-${n}` })
          .expect(201);
      }
    }
    return { ...maker, ids };
  }

  it("one user's four organizations of hanging endpoints hold two organizations' 16 slots: another tenant's event arrives within 2 s", async () => {
    const run = randomUUID();
    await hangingAccount(run, [4, 4, 4, 4]);
    await receiver.waitFor(() => receiver.at(`/hang/${run}/`).length >= 16, 5_000, 'hanging');
    const firstHanging = Math.min(...receiver.at(`/hang/${run}/`).map((hook) => hook.receivedAt));

    expect(await lagOfAnotherTenant(t, run)).toBeLessThanOrEqual(2_000);
    // Before the first hanging attempts time out, at most 16 of the account's were made.
    const early = receiver
      .at(`/hang/${run}/`)
      .filter((hook) => hook.receivedAt < firstHanging + 4_000);
    expect(early.length).toBeLessThanOrEqual(16);
  }, 40_000);

  it("one organization hanging leaves its maker's other organization a share: that one's event arrives within 2 s", async () => {
    const run = randomUUID();
    const account = await hangingAccount(run, [4, 0]);
    await receiver.waitFor(() => receiver.at(`/hang/${run}/`).length >= 8, 5_000, 'hanging');
    const sibling = account.ids[1];
    const owner = (request: Test) =>
      request
        .set('Authorization', `Bearer ${account.accessToken}`)
        .set('X-Organization-Id', sibling);
    await owner(t.http().post('/v1/webhook-endpoints'))
      .send({ url: receiver.url(`ok/${run}/sibling`), events: ['end_user.created'] })
      .expect(201);
    await owner(t.http().post('/v1/end-users')).send({ user_id: 'sibling' }).expect(201);
    const answeredAt = Date.now();
    await receiver.waitFor(
      () => receiver.at(`/ok/${run}/sibling`).length > 0,
      15_000,
      "the sibling organization's event",
    );
    expect(receiver.at(`/ok/${run}/sibling`)[0].receivedAt - answeredAt).toBeLessThanOrEqual(2_000);
  }, 40_000);
});

describe('The fair claim (WebhooksRepository.claimDue)', () => {
  let t: TestApp;
  let repository: WebhooksRepository;

  beforeAll(async () => {
    // A long poll interval: after its first (empty) poll this instance claims nothing itself.
    t = await createTestApp({ env: { ...FAST, WEBHOOK_POLL_INTERVAL_MS: '60000' } });
    repository = t.app.get(WebhooksRepository);
  });
  afterAll(() => t.close());

  const limits = (overrides: Partial<ClaimLimits> = {}): ClaimLimits => ({
    limit: 1000,
    perAccount: 16,
    perOrganization: 8,
    perEndpoint: 4,
    busyAccounts: new Map(),
    busyOrganizations: new Map(),
    busyEndpoints: new Map(),
    endpointsPerClaim: 256,
    cursor: null,
    ...overrides,
  });

  /** The uuid just before `id`: a cursor whose next endpoint is `id` itself. */
  const before = (id: string) => {
    const hex = id.replace(/-/g, '');
    const previous = (BigInt(`0x${hex}`) - 1n).toString(16).padStart(32, '0');
    return `${previous.slice(0, 8)}-${previous.slice(8, 12)}-${previous.slice(12, 16)}-${previous.slice(16, 20)}-${previous.slice(20)}`;
  };

  it('takes each endpoint up to its cap and each organization up to its cap, minus what this instance has in flight, and tells which caps held work back', async () => {
    const busy = await adminTenant(t);
    const quiet = await adminTenant(t);
    const run = randomUUID();
    const busyEndpoints: string[] = [];
    for (let i = 0; i < 3; i++) {
      busyEndpoints.push((await createEndpoint(t, busy, receiver.url(`ok/${run}/${i}`))).id);
    }
    const quietEndpoint = (await createEndpoint(t, quiet, receiver.url(`ok/${run}/quiet`))).id;
    for (let n = 0; n < 10; n++) {
      await emit(t, busy.organizationId, 'end_user.created', { user_id: `b-${n}` });
    }
    await emit(t, quiet.organizationId, 'end_user.created', { user_id: 'q' });
    const ours = (attempts: ClaimedAttempt[]) =>
      attempts.filter((a) =>
        [busy.organizationId, quiet.organizationId].includes(a.organization_id),
      );
    const byEndpoint = (attempts: ClaimedAttempt[]) => {
      const counts = new Map<string, number>();
      for (const a of attempts) counts.set(a.endpoint_id, (counts.get(a.endpoint_id) ?? 0) + 1);
      return counts;
    };
    const giveBack = (attempts: ClaimedAttempt[]) =>
      repository.release(attempts.map((a) => ({ id: a.id, lockToken: a.lock_token })));

    // 30 attempts due on 3 endpoints, 1 on another organization's: 8 of the first
    // (3 + 3 + 2, the endpoints taking turns) and the other's one.
    const first = await repository.claimDue(limits(), 60_000, randomUUID(), new Date());
    const mine = ours(first.attempts);
    expect(mine.filter((a) => a.organization_id === quiet.organizationId)).toHaveLength(1);
    const fromBusy = mine.filter((a) => a.organization_id === busy.organizationId);
    expect(fromBusy).toHaveLength(8);
    expect([...byEndpoint(fromBusy).values()].sort()).toEqual([2, 3, 3]);
    expect(first.heldBack.organizations.has(busy.organizationId)).toBe(true);
    expect(first.heldBack.organizations.has(quiet.organizationId)).toBe(false);
    expect(first.heldBack.endpoints.has(quietEndpoint)).toBe(false);
    await giveBack(first.attempts);

    // With 6 of the organization's attempts in flight here (4 of them to its first endpoint):
    // 2 more, none to that endpoint.
    const second = await repository.claimDue(
      limits({
        busyOrganizations: new Map([[busy.organizationId, 6]]),
        busyEndpoints: new Map([[busyEndpoints[0], 4]]),
      }),
      60_000,
      randomUUID(),
      new Date(),
    );
    const busyNow = ours(second.attempts).filter((a) => a.organization_id === busy.organizationId);
    expect(busyNow).toHaveLength(2);
    expect(busyNow.some((a) => a.endpoint_id === busyEndpoints[0])).toBe(false);
    expect(second.heldBack.endpoints.has(busyEndpoints[0])).toBe(true);
    await giveBack(second.attempts);

    // One endpoint per claim, from a cursor: the endpoint after it, and the cursor moves on.
    const third = await repository.claimDue(
      limits({ endpointsPerClaim: 1, cursor: before(quietEndpoint) }),
      60_000,
      randomUUID(),
      new Date(),
    );
    expect(third.attempts.map((a) => a.endpoint_id)).toEqual([quietEndpoint]);
    expect(third.cursor).toBe(quietEndpoint);
    await giveBack(third.attempts);
  });

  it("shares one organization's slots among the organizations one user made", async () => {
    const maker = await adminTenant(t);
    const second = await t
      .http()
      .post('/v1/organizations')
      .set('Authorization', `Bearer ${maker.accessToken}`)
      .send({ name: `second ${randomUUID()}` });
    expect(second.status).toBe(201);
    const organizations = [maker.organizationId, second.body.id as string];
    const run = randomUUID();
    for (const [o, organizationId] of organizations.entries()) {
      for (let i = 0; i < 2; i++) {
        await t
          .http()
          .post('/v1/webhook-endpoints')
          .set('Authorization', `Bearer ${maker.accessToken}`)
          .set('X-Organization-Id', organizationId)
          .send({ url: receiver.url(`ok/${run}/${o}/${i}`), events: ALL_EVENTS })
          .expect(201);
      }
      for (let n = 0; n < 8; n++) {
        await emit(t, organizationId, 'end_user.created', { user_id: `u-${o}-${n}` });
      }
    }
    const ours = (attempts: ClaimedAttempt[]) =>
      attempts.filter((a) => organizations.includes(a.organization_id));

    // 32 attempts due in two organizations of one maker, 8 slots an account: 8 in all, 4 of
    // each (turns).
    const first = await repository.claimDue(
      limits({ perAccount: 8 }),
      60_000,
      randomUUID(),
      new Date(),
    );
    const mine = ours(first.attempts);
    expect(mine).toHaveLength(8);
    for (const organizationId of organizations) {
      expect(mine.filter((a) => a.organization_id === organizationId)).toHaveLength(4);
    }
    expect(new Set(mine.map((a) => a.account)).size).toBe(1);
    // Held back by the account's cap, not by either organization's (8, of which each got 4):
    // waking for those claimed about once per attempt that ended (review).
    expect(first.heldBack.accounts.has(mine[0].account)).toBe(true);
    for (const organizationId of organizations) {
      expect(first.heldBack.organizations.has(organizationId)).toBe(false);
    }
    await repository.release(mine.map((a) => ({ id: a.id, lockToken: a.lock_token })));

    // With 6 of the account's in flight here, in either organization: 2 more.
    const account = mine[0].account;
    const next = await repository.claimDue(
      limits({ perAccount: 8, busyAccounts: new Map([[account, 6]]) }),
      60_000,
      randomUUID(),
      new Date(),
    );
    expect(ours(next.attempts)).toHaveLength(2);
    await repository.release(next.attempts.map((a) => ({ id: a.id, lockToken: a.lock_token })));
  });
});

describe('An endpoint whose attempts all fail for WEBHOOK_DISABLE_AFTER_HOURS (§25)', () => {
  const clock = new ManualClock();
  let t: TestApp;
  let smtp: TestSmtpServer;

  beforeAll(async () => {
    smtp = await new TestSmtpServer().start();
    t = await createTestApp({
      env: { ...FAST, SMTP_URL: smtp.url, WEBHOOK_DISABLE_AFTER_HOURS: '72' },
      override: (builder) => builder.overrideProvider(Clock).useValue(clock),
    });
  });
  afterAll(async () => {
    await t.close();
    await smtp.stop();
  });

  const isDisabledNotice = (mail: CapturedMail) => mail.subject.includes('was disabled');

  it('is disabled (disabled_reason "failing") and its owners and admins are e-mailed once; one that recovered is not', async () => {
    clock.set(new Date());
    const owner = await signUpVerified(t, smtp);
    const tenant = {
      ...owner,
      auth: `Bearer ${await createApiKey(t, owner.accessToken, ['admin'])}`,
    };
    const admin = await joinOrganization(t, smtp, owner, 'admin');
    const member = await joinOrganization(t, smtp, owner, 'member');
    const run = randomUUID();
    const failing = await createEndpoint(t, tenant, receiver.url(`fail/${run}`));
    const recovering = await createEndpoint(t, tenant, receiver.url(`flaky/1/${run}`));
    const healthy = await createEndpoint(t, tenant, receiver.url(`ok/${run}`));

    await emit(t, owner.organizationId, 'end_user.created', { user_id: 'first' });
    await waitForDeliveries(t, tenant, failing.id, (a) => a.some((x) => x.status === 'failed'));
    await waitForDeliveries(t, tenant, recovering.id, (a) => a.some((x) => x.status === 'failed'));
    // The recovering endpoint's retry (due 200 ms on) succeeds.
    clock.advance(1_000);
    await waitForDeliveries(t, tenant, recovering.id, (a) =>
      a.some((x) => x.status === 'succeeded'),
    );
    await waitForDeliveries(t, tenant, healthy.id, (a) => a.some((x) => x.status === 'succeeded'));

    // (Endpoints of the other specs of this file, on the same database, may be disabled too.)
    const failingFor = async (hours: number) => {
      clock.advance(hours * 3_600_000);
      const all = await t.app.get(FailingEndpointsWorker).disableDue();
      return all.filter((endpoint) => endpoint.organizationId === owner.organizationId);
    };
    // The first failure was a second ago: not yet 71 hours and 59 minutes on, then 72 h 1 min.
    expect(await failingFor(72 - 1 / 60)).toEqual([]);
    const disabled = await failingFor(2 / 60);
    expect(disabled.map((endpoint) => endpoint.id)).toEqual([failing.id]);

    const get = (id: string) =>
      t.http().get(`/v1/webhook-endpoints/${id}`).set('Authorization', tenant.auth);
    expect((await get(failing.id)).body).toMatchObject({
      status: 'disabled',
      disabled_reason: 'failing',
    });
    for (const id of [recovering.id, healthy.id]) {
      expect((await get(id)).body).toMatchObject({ status: 'enabled', disabled_reason: null });
    }
    // Its pending retry ended with it.
    const attempts = await deliveries(t, tenant, failing.id);
    expect(attempts.filter((a) => a.status === 'pending')).toEqual([]);

    for (const manager of [owner, admin]) {
      const mail = await smtp.waitFor(manager.email, 5_000, isDisabledNotice);
      expect(mail.decoded).toContain(failing.id);
      // Its origin, never the rest of its URL (where a receiver's credentials sit).
      expect(mail.decoded).toContain(new URL(receiver.url(`fail/${run}`)).origin);
      expect(mail.decoded).not.toContain(run);
      expect(mail.decoded).not.toContain('/fail/');
    }
    // Once: a later run finds nothing more to disable, and nobody else is mailed (a run
    // resolves once its mails are handed to the SMTP server).
    expect(await failingFor(1)).toEqual([]);
    expect(smtp.mailsTo(owner.email, isDisabledNotice)).toHaveLength(1);
    expect(smtp.mailsTo(admin.email, isDisabledNotice)).toHaveLength(1);
    expect(smtp.mailsTo(member.email, isDisabledNotice)).toHaveLength(0);

    // Enabled again by the organization: the reason is gone.
    const enabled = await t
      .http()
      .patch(`/v1/webhook-endpoints/${failing.id}`)
      .set('Authorization', tenant.auth)
      .send({ status: 'enabled' });
    expect(enabled.body).toMatchObject({ status: 'enabled', disabled_reason: null });
  });
});

describe('Webhook URLs: ports, the stored form, what a refusal says (§25)', () => {
  let t: TestApp;
  let tenant: Tenant;

  beforeAll(async () => {
    // The production defaults: ports 80, 443, 8080, 8443 only, private addresses refused.
    t = await createTestApp({
      env: { ...FAST, WEBHOOK_ALLOW_PRIVATE_URLS: 'false', WEBHOOK_ALLOWED_PORTS: undefined },
    });
    tenant = await adminTenant(t);
  });
  afterAll(() => t.close());

  const post = (url: string) =>
    t
      .http()
      .post('/v1/webhook-endpoints')
      .set('Authorization', tenant.auth)
      .send({ url, events: ['end_user.created'] });

  it.each([
    'https://93.184.215.14:9000/hook',
    'http://93.184.215.14:22/',
    'https://93.184.215.14:1/',
  ])('refuses %s: by default only ports 80, 443, 8080 and 8443', async (url) => {
    const response = await post(url);
    expectError(response, 400, 'validation_failed');
    expect(response.body.error.details).toEqual([
      { field: 'url', problem: expect.stringMatching(/port/) },
    ]);
  });

  it('accepts the default ports, and refuses a PATCH to another one', async () => {
    const ids: string[] = [];
    for (const url of [
      'http://93.184.215.14/a',
      'https://93.184.215.14:443/b',
      'http://93.184.215.14:8080/c',
      'https://93.184.215.14:8443/d',
    ]) {
      const response = await post(url);
      expect({ url, status: response.status }).toEqual({ url, status: 201 });
      ids.push(response.body.id as string);
    }
    const patched = await t
      .http()
      .patch(`/v1/webhook-endpoints/${ids[0]}`)
      .set('Authorization', tenant.auth)
      .send({ url: 'https://93.184.215.14:9000/hook' });
    expectError(patched, 400, 'validation_failed');
    for (const id of ids) {
      await t.http().delete(`/v1/webhook-endpoints/${id}`).set('Authorization', tenant.auth);
    }
  });

  it('stores and shows the URL in its normalised (WHATWG) form', async () => {
    const response = await post('HTTPS://93.184.215.14:443/a/./b/../hook?x=1');
    expect(response.status).toBe(201);
    expect(response.body.url).toBe('https://93.184.215.14/a/hook?x=1');
    const one = await t
      .http()
      .get(`/v1/webhook-endpoints/${response.body.id}`)
      .set('Authorization', tenant.auth);
    expect(one.body.url).toBe('https://93.184.215.14/a/hook?x=1');
    await t
      .http()
      .delete(`/v1/webhook-endpoints/${response.body.id}`)
      .set('Authorization', tenant.auth);
  });

  it('says that the host is not a public address, never what it resolved to', async () => {
    const response = await post('http://localhost:8080/hook');
    expectError(response, 400, 'validation_failed');
    const problem = (response.body.error.details as Array<{ problem: string }>)[0].problem;
    expect(problem).toMatch(/not a public address/);
    expect(problem).not.toMatch(/127\.0\.0\.1|::1|resolves to/);
  });

  it('says the same of a name that does not resolve as of an internal one (no DNS oracle)', async () => {
    const problemOf = async (host: string) => {
      const response = await post(`http://${host}:8080/hook`);
      expectError(response, 400, 'validation_failed');
      return (response.body.error.details as Array<{ problem: string }>)[0].problem;
    };
    const internal = await problemOf('localhost');
    expect(await problemOf('no-such-host.invalid')).toBe(
      internal.replace('localhost', 'no-such-host.invalid'),
    );
  });

  it('lets WEBHOOK_ALLOWED_PORTS widen the ports (ports and ranges)', async () => {
    const wide = await createTestApp({
      env: {
        ...FAST,
        WEBHOOK_ALLOW_PRIVATE_URLS: 'false',
        WEBHOOK_ALLOWED_PORTS: '443, 9000-9100',
      },
    });
    try {
      const other = await adminTenant(wide);
      const send = (url: string) =>
        wide
          .http()
          .post('/v1/webhook-endpoints')
          .set('Authorization', other.auth)
          .send({ url, events: ['end_user.created'] });
      expect((await send('https://93.184.215.14:9050/hook')).status).toBe(201);
      expect((await send('https://93.184.215.14/hook')).status).toBe(201);
      expectError(await send('http://93.184.215.14/hook'), 400, 'validation_failed');
      expectError(await send('https://93.184.215.14:9101/hook'), 400, 'validation_failed');
    } finally {
      await wide.close();
    }
  });
});

describe('Server-side request forgery guard (WEBHOOK_ALLOW_PRIVATE_URLS=false)', () => {
  let t: TestApp;
  let tenant: Tenant;

  beforeAll(async () => {
    t = await createTestApp({ env: { ...FAST, WEBHOOK_ALLOW_PRIVATE_URLS: 'false' } });
    tenant = await adminTenant(t);
  });
  afterAll(() => t.close());

  it.each([
    'http://10.0.0.5/hook',
    'http://127.0.0.1:8080/hook',
    'http://169.254.169.254/latest/meta-data/',
    'http://[::1]:8080/hook',
    'http://localhost:8080/hook',
    'http://192.168.1.10/hook',
    'http://[fd00:ec2::254]/',
    'http://2130706433/',
  ])('refuses %s with validation_failed', async (url) => {
    const response = await t
      .http()
      .post('/v1/webhook-endpoints')
      .set('Authorization', tenant.auth)
      .send({ url, events: ['end_user.created'] });
    expectError(response, 400, 'validation_failed');
    expect(response.body.error.details).toEqual([
      { field: 'url', problem: expect.stringMatching(/not a public address/) },
    ]);
  });

  it('accepts a public address, refuses a PATCH to a private one', async () => {
    const { id } = await createEndpoint(t, tenant, 'https://93.184.215.14/hook');
    const response = await t
      .http()
      .patch(`/v1/webhook-endpoints/${id}`)
      .set('Authorization', tenant.auth)
      .send({ url: 'http://127.0.0.1/hook' });
    expectError(response, 400, 'validation_failed');
    const still = await t
      .http()
      .get(`/v1/webhook-endpoints/${id}`)
      .set('Authorization', tenant.auth);
    expect(still.body.url).toBe('https://93.184.215.14/hook');
    await t.http().delete(`/v1/webhook-endpoints/${id}`).set('Authorization', tenant.auth);
  });

  it('checks the address again at each delivery: a URL that now reaches loopback is not called', async () => {
    const dataSource = t.app.get<DataSource>(getDataSourceToken());
    for (const host of ['127.0.0.1', 'localhost']) {
      const { id } = await createEndpoint(t, tenant, 'https://93.184.215.14/hook');
      // As if the name now resolved to loopback (DNS rebinding): the stored URL points there.
      const path = `ok/rebound-${host}-${randomUUID()}`;
      await dataSource.query('UPDATE webhook_endpoints SET url = $1 WHERE id = $2', [
        receiver.url(path, host),
        id,
      ]);
      const ping = await t
        .http()
        .post(`/v1/webhook-endpoints/${id}/test`)
        .set('Authorization', tenant.auth);
      expect(ping.status).toBe(202);
      const attempts = await waitForDeliveries(t, tenant, id, (a) =>
        a.some((x) => x.status === 'failed'),
      );
      expect(attempts.find((a) => a.status === 'failed')).toMatchObject({
        response_status: null,
        error: expect.stringMatching(/not a public address/),
      });
      expect(receiver.at(`/${path}`)).toEqual([]);
      await t.http().delete(`/v1/webhook-endpoints/${id}`).set('Authorization', tenant.auth);
    }
  });
});

describe('Two instances on one database', () => {
  let a: TestApp;
  let b: TestApp;
  let tenant: Tenant;

  beforeAll(async () => {
    const env = { ...FAST, WEBHOOK_CONCURRENCY: '8', WEBHOOK_TIMEOUT_MS: '5000' };
    a = await createTestApp({ env });
    b = await createTestApp({ env });
    tenant = await adminTenant(a);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it('deliver a burst: every event arrives, and none is attempted twice', async () => {
    const path = `slow/20/burst-${randomUUID()}`;
    const { id, secret } = await createEndpoint(a, tenant, receiver.url(path));
    const EVENTS = 300;
    const sent: string[] = [];
    const emitters = [a, b];
    for (let batch = 0; batch < EVENTS / 50; batch++) {
      const t = emitters[batch % 2];
      const dataSource = t.app.get<DataSource>(getDataSourceToken());
      const events = t.app.get(WebhookEventsService);
      await dataSource.transaction(async (manager) => {
        for (let i = 0; i < 50; i++) {
          const n = `${batch}-${i}`;
          sent.push(n);
          await events.emit(manager, tenant.organizationId, 'end_user.created', { user_id: n });
        }
      });
    }
    await receiver.waitFor(() => receiver.at(`/${path}`).length >= EVENTS, 30_000, 'the burst');
    await quiet(a, id);
    const hooks = receiver.at(`/${path}`);
    const perId = new Map<string, number>();
    for (const hook of hooks)
      perId.set(
        String(hook.headers['webhook-id']),
        (perId.get(String(hook.headers['webhook-id'])) ?? 0) + 1,
      );
    expect(hooks).toHaveLength(EVENTS);
    expect([...perId.values()].filter((count) => count !== 1)).toEqual([]);
    const users = hooks.map((hook) => (verify(hook, secret).data as { user_id: string }).user_id);
    expect(users.sort()).toEqual([...sent].sort());
  });
});

describe('An instance that stops between the change and the delivery', () => {
  it('loses nothing: the next instance delivers, and a dead claim is retried when its lease runs out', async () => {
    // A long poll interval: after its first (empty) poll this instance will not deliver.
    const first = await createTestApp({ env: { ...FAST, WEBHOOK_POLL_INTERVAL_MS: '60000' } });
    const tenant = await adminTenant(first);
    const path = `ok/crash-${randomUUID()}`;
    const { id, secret } = await createEndpoint(first, tenant, receiver.url(path));
    await emit(first, tenant.organizationId, 'end_user.deleted', { user_id: 'after-crash' });
    await emit(first, tenant.organizationId, 'end_user.created', { user_id: 'claimed' });
    // One event is claimed by an instance that then dies (a 1.5 s lease, never recorded).
    const { attempts: claimed } = await first.app.get(WebhooksRepository).claimDue(
      {
        limit: 1,
        perAccount: 16,
        perOrganization: 8,
        perEndpoint: 4,
        busyAccounts: new Map(),
        busyOrganizations: new Map(),
        busyEndpoints: new Map(),
        endpointsPerClaim: 256,
        cursor: null,
      },
      1500,
      randomUUID(),
      new Date(),
    );
    expect(claimed).toHaveLength(1);
    const claimedAt = Date.now();
    const deadClaim = (claimed[0].data as { user_id: string }).user_id;
    await first.close();
    expect(receiver.at(`/${path}`)).toEqual([]);

    const second = await createTestApp({ env: FAST });
    try {
      await receiver.waitFor(() => receiver.at(`/${path}`).length === 2, 15_000);
      const hooks = receiver.at(`/${path}`);
      const byUser = new Map(
        hooks.map((hook) => [(verify(hook, secret).data as { user_id: string }).user_id, hook]),
      );
      expect([...byUser.keys()].sort()).toEqual(['after-crash', 'claimed']);
      expect(byUser.get(deadClaim)!.receivedAt - claimedAt).toBeGreaterThanOrEqual(1400);
      await quiet(second, id);
      expect(receiver.at(`/${path}`)).toHaveLength(2);
    } finally {
      await second.close();
    }
  });

  it('at shutdown, an attempt still in flight after the grace is cut off and handed back, due at once', async () => {
    const t = await createTestApp({ env: { ...FAST, WEBHOOK_TIMEOUT_MS: '20000' } });
    const tenant = await adminTenant(t);
    const path = `hang/shutdown-${randomUUID()}`;
    const { id } = await createEndpoint(t, tenant, receiver.url(path));
    await emit(t, tenant.organizationId, 'end_user.created', { user_id: 'cut-off' });
    await receiver.waitFor(() => receiver.at(`/${path}`).length === 1);
    const dataSource = t.app.get<DataSource>(getDataSourceToken());
    const started = Date.now();
    await t.close();
    const closedIn = Date.now() - started;
    expect(closedIn).toBeGreaterThanOrEqual(4_500); // the 5 s grace
    expect(closedIn).toBeLessThan(10_000);
    expect(dataSource.isInitialized).toBe(false);
    const db = new Client({ connectionString: process.env.DATABASE_URL });
    await db.connect();
    try {
      const { rows } = await db.query(
        'SELECT attempt, status, locked_until, lock_token FROM webhook_delivery_attempts WHERE endpoint_id = $1',
        [id],
      );
      // Still attempt 1, pending, unclaimed: any instance may make it at once.
      expect(rows).toEqual([
        { attempt: 1, status: 'pending', locked_until: null, lock_token: null },
      ]);
    } finally {
      await db.end();
    }
  });
});
