import type { TestingModule } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { DataSource } from 'typeorm';
import type { UserCaller } from '../../src/common/auth/caller';
import { createValidationPipe } from '../../src/common/validation/validation.pipe';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import {
  CreateWebhookEndpointDto,
  UpdateWebhookEndpointDto,
} from '../../src/webhooks/dto/webhook-endpoint.dto';
import { WebhookDeliveryWorker } from '../../src/webhooks/webhook-delivery.worker';
import {
  MAX_ENDPOINTS_PER_ORGANIZATION,
  WebhookEndpointsService,
} from '../../src/webhooks/webhook-endpoints.service';
import { WebhookEventsService } from '../../src/webhooks/webhook-events.service';
import type { SubscribableEventType } from '../../src/webhooks/webhook-event-types';
import { signatureHeaders } from '../../src/webhooks/webhook-signer';
import { WebhooksModule } from '../../src/webhooks/webhooks.module';
import { AppError } from '../../src/common/errors/app-error';
import { AuditKeepsWebhookOrigins1795921400000 } from '../../src/database/migrations/1795921400000-AuditKeepsWebhookOrigins';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';
import { revertAndRerun } from '../support/migration-rerun';
import { eventually } from '../support/wait';
import { WebhookReceiver } from '../support/webhook-receiver';

/** A public address literal: accepted by the SSRF guard without a DNS lookup, never called here. */
const PUBLIC = '93.184.215.14';

/** The defaults a production install runs with: the SSRF guard on, the web's four ports. */
const GUARDED_ENV = { WEBHOOK_ALLOW_PRIVATE_URLS: 'false', WEBHOOK_ALLOWED_PORTS: undefined };

/** As the HTTP e2e specs configure it: the receiver is on loopback, on a random port. */
const RECEIVER_ENV = {
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  WEBHOOK_ALLOWED_PORTS: '1-65535',
  WEBHOOK_POLL_INTERVAL_MS: '50',
  WEBHOOK_TIMEOUT_MS: '2000',
};

/**
 * The webhooks module alone on a real PostgreSQL, without HTTP ("medium" spec): the rules of
 * WebhookEndpointsService (secret, URL, cap, status, tenancy) and WebhookEventsService (the
 * outbox), called directly, and one delivery by the worker to a real receiver on loopback.
 * Request bodies go through the application's validation pipe first, as a request's would.
 */
describe('Webhooks services (real database)', () => {
  let moduleRef: TestingModule;
  let endpoints: WebhookEndpointsService;
  let events: WebhookEventsService;
  let database: Database;
  let factory: Factory;
  /** Every organization this spec makes: their pending attempts are ended before the worker runs. */
  const organizations: string[] = [];
  const pipe = createValidationPipe();

  beforeAll(async () => {
    moduleRef = await moduleAlone([WebhooksModule], GUARDED_ENV);
    endpoints = moduleRef.get(WebhookEndpointsService);
    events = moduleRef.get(WebhookEventsService);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterAll(() => moduleRef?.close());

  async function admin(): Promise<UserCaller> {
    const organizationId = await factory.organization();
    organizations.push(organizationId);
    // A user of the database: an endpoint records who made it.
    const userId = await factory.member(organizationId, 'admin');
    return { kind: 'user', organizationId, userId, scopes: ['admin'] };
  }

  /** The body as the controller receives it: validated and transformed by the global pipe. */
  function createBody(body: Record<string, unknown>): Promise<CreateWebhookEndpointDto> {
    return pipe.transform(body, {
      type: 'body',
      metatype: CreateWebhookEndpointDto,
    }) as Promise<CreateWebhookEndpointDto>;
  }
  function updateBody(body: Record<string, unknown>): Promise<UpdateWebhookEndpointDto> {
    return pipe.transform(body, {
      type: 'body',
      metatype: UpdateWebhookEndpointDto,
    }) as Promise<UpdateWebhookEndpointDto>;
  }

  async function createEndpoint(
    caller: UserCaller,
    events: SubscribableEventType[] = ['end_user.created'],
    url = `https://${PUBLIC}/hook/${randomUUID()}`,
  ) {
    return endpoints.create(caller, await createBody({ url, events }));
  }

  /** What another module does: the change and its event in one transaction. */
  function emit(organizationId: string, type: SubscribableEventType, data = {}): Promise<void> {
    return database.transaction((manager) => events.emit(manager, organizationId, type, data));
  }

  /** The field problems of a validation_failed refusal. */
  async function problems(promise: Promise<unknown>) {
    const error = await promise.then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('validation_failed');
    return (error as AppError).details;
  }

  async function attemptsOf(endpointId: string) {
    return database.rows<{ status: string; error: string | null; next_attempt_at: Date | null }>(
      sql`SELECT status, error, next_attempt_at FROM webhook_delivery_attempts
           WHERE endpoint_id = ${endpointId} ORDER BY created_at, id`,
    );
  }

  async function countWhere(table: 'webhook_endpoints' | 'webhook_events', organizationId: string) {
    const [row] = await database.rows<{ n: number }>(
      table === 'webhook_endpoints'
        ? sql`SELECT count(*)::int AS n FROM webhook_endpoints WHERE organization_id = ${organizationId}`
        : sql`SELECT count(*)::int AS n FROM webhook_events WHERE organization_id = ${organizationId}`,
    );
    return row.n;
  }

  describe('WebhookEndpointsService', () => {
    it('shows a whsec_ secret of 32 random bytes once: stored as is, never listed, got or audited', async () => {
      const caller = await admin();
      const created = await endpoints.create(
        caller,
        await createBody({
          url: `HTTPS://${PUBLIC}:443/a/./b/../hook`,
          events: ['end_user.deleted'],
          description: 'CRM sync',
        }),
      );
      expect(created).toEqual({
        id: expect.any(String),
        url: `https://${PUBLIC}/a/hook`, // normalised (WHATWG), default port dropped
        events: ['end_user.deleted'],
        description: 'CRM sync',
        status: 'enabled',
        disabled_reason: null,
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]+=*$/),
        created_at: expect.any(String),
      });
      expect(Buffer.from(created.secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
      // Stored as is: each delivery is signed with it.
      const [stored] = await database.rows<{ secret: string }>(
        sql`SELECT secret FROM webhook_endpoints WHERE id = ${created.id}`,
      );
      expect(stored.secret).toBe(created.secret);
      // A fresh secret for every endpoint.
      expect((await createEndpoint(caller)).secret).not.toBe(created.secret);

      const { secret, ...shown } = created;
      expect(await endpoints.get(caller.organizationId, created.id)).toEqual(shown);
      const page = await endpoints.list(caller.organizationId, 10);
      expect(page.data[0]).toEqual(shown); // oldest first
      expect(JSON.stringify(page)).not.toContain(secret.slice('whsec_'.length));

      const audit = await database.rows<{ action: string; details: unknown }>(
        sql`SELECT action, details FROM audit_events WHERE target_id = ${created.id}`,
      );
      expect(audit).toEqual([
        {
          action: 'webhook_endpoint.created',
          details: { url: `https://${PUBLIC}`, events: ['end_user.deleted'] },
        },
      ]);
    });

    it('audits a URL by its origin: credentials in its path or query stay out of the log', async () => {
      const caller = await admin();
      const created = await endpoints.create(
        caller,
        await createBody({
          url: `https://${PUBLIC}/services/T0/B0/s3cretpath?token=s3cretquery`,
          events: ['end_user.created'],
        }),
      );
      // The endpoint itself still shows its admins the whole URL it posts to.
      expect(created.url).toContain('s3cretpath?token=s3cretquery');
      await endpoints.update(
        caller,
        created.id,
        await updateBody({ url: `https://${PUBLIC}/other/s3cretpath2#frag` }),
      );
      await endpoints.remove(caller, created.id);
      const audit = await database.rows<{ action: string; details: { url: string } }>(
        sql`SELECT action, details FROM audit_events WHERE target_id = ${created.id}
             ORDER BY created_at, id`,
      );
      expect(audit.map(({ action, details }) => [action, details.url])).toEqual([
        ['webhook_endpoint.created', `https://${PUBLIC}`],
        ['webhook_endpoint.updated', `https://${PUBLIC}`],
        ['webhook_endpoint.deleted', `https://${PUBLIC}`],
      ]);
      expect(JSON.stringify(audit)).not.toMatch(/s3cret|frag/);
    });

    it('migration AuditKeepsWebhookOrigins leaves only the origin of the URLs audited before', async () => {
      const caller = await admin();
      const event = (action: string, details: Record<string, unknown>) =>
        sql`INSERT INTO audit_events (organization_id, action, actor_type, actor_id, target_type,
                                      target_id, details, created_at)
            VALUES (${caller.organizationId}, ${action}, 'user', ${caller.userId},
                    'webhook_endpoint', ${randomUUID()}, ${JSON.stringify(details)}::jsonb, now())
            RETURNING id`;
      const ids: string[] = [];
      await revertAndRerun(
        moduleRef.get(DataSource),
        new AuditKeepsWebhookOrigins1795921400000(),
        async () => {
          // As the previous release audited them: the URL whole.
          for (const [action, details] of [
            [
              'webhook_endpoint.created',
              {
                url: 'https://u:p%40ss@hooks.example/services/T/B/key?token=abc',
                events: ['end_user.created'],
              },
            ],
            [
              'webhook_endpoint.updated',
              { url: 'http://[2001:db8::1]:8080/path#frag', status: 'enabled' },
            ],
            ['webhook_endpoint.updated', { status: 'disabled' }],
            ['webhook_endpoint.deleted', { url: 'https://hooks.example/', events: [] }],
            // As the first releases stored and audited a URL: as it was typed.
            [
              'webhook_endpoint.created',
              { url: 'HTTPS://Hooks.Slack.com/services/T/B/SECRET', events: [] },
            ],
            ['webhook_endpoint.updated', { url: 'https:\\\\hooks.example\\SECRET' }],
            ['webhook_endpoint.updated', { url: ' https://hooks.example/SECRET ' }],
            ['webhook_endpoint.deleted', { url: 'hooks.example/SECRET', events: [] }],
            ['personality.deleted', { url: 'https://elsewhere.example/kept/as/is' }],
          ] as const) {
            const [row] = await database.rows<{ id: string }>(event(action, details));
            ids.push(row.id);
          }
        },
      );
      const rows = await database.rows<{ id: string; details: unknown }>(
        sql`SELECT id, details FROM audit_events WHERE id = ANY(${ids}::uuid[])`,
      );
      const byId = new Map(rows.map((row) => [row.id, row.details]));
      expect(ids.map((id) => byId.get(id))).toEqual([
        { url: 'https://hooks.example', events: ['end_user.created'] },
        { url: 'http://[2001:db8::1]:8080', status: 'enabled' },
        { status: 'disabled' },
        { url: 'https://hooks.example', events: [] },
        { url: 'https://hooks.slack.com', events: [] },
        { url: 'https://hooks.example' },
        { url: 'https://hooks.example' },
        // Not a URL the parser reads: nothing of it is kept.
        { url: null, events: [] },
        { url: 'https://elsewhere.example/kept/as/is' },
      ]);
    });

    it('refuses non-public hosts and other ports at create and update, naming the host only, storing nothing', async () => {
      const caller = await admin();
      for (const url of [
        'http://127.0.0.1:8080/hook',
        'http://169.254.169.254/latest/meta-data/',
        'http://10.0.0.5/hook',
        'http://[::ffff:127.0.0.1]/hook',
        'http://[fd00:ec2::254]/',
        'http://2130706433/',
        'http://localhost:8080/hook',
      ]) {
        const details = await problems(
          endpoints.create(caller, await createBody({ url, events: ['end_user.created'] })),
        );
        expect({ url, details }).toEqual({
          url,
          details: [{ field: 'url', problem: expect.stringMatching(/not a public address/) }],
        });
      }
      // What localhost resolved to is never said.
      const named = await problems(
        endpoints.create(
          caller,
          await createBody({ url: 'http://localhost:8080/h', events: ['end_user.created'] }),
        ),
      );
      expect(named?.[0].problem).toMatch(/^localhost is not a public address/);
      expect(named?.[0].problem).not.toMatch(/127\.0\.0\.1|::1/);
      expect(
        await problems(
          endpoints.create(
            caller,
            await createBody({ url: `https://${PUBLIC}:9000/hook`, events: ['end_user.created'] }),
          ),
        ),
      ).toEqual([{ field: 'url', problem: expect.stringMatching(/^port 9000 is not allowed/) }]);
      // 2,000 characters as sent, 12,000 percent-encoded as stored: the bound is the stored one.
      const grown = `https://${PUBLIC}/${'é'.repeat(2_000)}`;
      expect(grown.length).toBeLessThanOrEqual(2048);
      expect(
        await problems(
          endpoints.create(caller, await createBody({ url: grown, events: ['end_user.created'] })),
        ),
      ).toEqual([{ field: 'url', problem: 'must be at most 2048 characters once normalised' }]);
      expect(await countWhere('webhook_endpoints', caller.organizationId)).toBe(0);

      // An update is held to the same rules, and leaves the endpoint as it was.
      const created = await createEndpoint(caller);
      for (const url of ['http://127.0.0.1/hook', `https://${PUBLIC}:22/hook`]) {
        await expectAppError(
          endpoints.update(caller, created.id, await updateBody({ url })),
          'validation_failed',
        );
      }
      expect((await endpoints.get(caller.organizationId, created.id)).url).toBe(created.url);
    });

    it('subscribes to the documented event types only (ping among them, as contract §17 lists it)', async () => {
      const caller = await admin();
      const url = `https://${PUBLIC}/hook`;
      for (const events of [['end_user.exploded'], [], ['ping', 'ping'], ['pong']]) {
        const error = await createBody({ url, events }).catch((thrown: unknown) => thrown);
        expect(error).toBeInstanceOf(AppError);
        expect((error as AppError).details).toEqual([expect.objectContaining({ field: 'events' })]);
      }
      const created = await createEndpoint(caller, ['end_user.deleted', 'conversation.flagged']);
      expect(created.events).toEqual(['end_user.deleted', 'conversation.flagged']);
      await expect(updateBody({ events: ['end_user.exploded'] })).rejects.toBeInstanceOf(AppError);
      expect((await updateBody({ events: ['end_user.created', 'ping'] })).events).toEqual([
        'end_user.created',
        'ping',
      ]);
      expect(await countWhere('webhook_endpoints', caller.organizationId)).toBe(1);
    });

    it(`caps an organization at ${MAX_ENDPOINTS_PER_ORGANIZATION} endpoints, disabled ones included, even when creates race`, async () => {
      const caller = await admin();
      const ids: string[] = [];
      for (let index = 0; index < MAX_ENDPOINTS_PER_ORGANIZATION - 2; index++) {
        ids.push((await createEndpoint(caller)).id);
      }
      await endpoints.update(caller, ids[0], { status: 'disabled' });
      const raced = await Promise.allSettled(
        Array.from({ length: 5 }, () => createEndpoint(caller)),
      );
      expect(raced.filter((result) => result.status === 'fulfilled')).toHaveLength(2);
      for (const result of raced.filter((r) => r.status === 'rejected')) {
        expect(result.reason).toMatchObject({
          code: 'webhook_endpoint_limit',
        });
      }
      expect(await countWhere('webhook_endpoints', caller.organizationId)).toBe(
        MAX_ENDPOINTS_PER_ORGANIZATION,
      );
      // The cap is per organization, and deleting one makes room again.
      await createEndpoint(await admin());
      await endpoints.remove(caller, ids[0]);
      await createEndpoint(caller);
      await expectAppError(createEndpoint(caller), 'webhook_endpoint_limit');
    });

    it('disabling ends pending attempts and queues nothing more; enabling clears the service’s reason', async () => {
      const caller = await admin();
      const { id } = await createEndpoint(caller, ['end_user.created']);
      await emit(caller.organizationId, 'end_user.created', { user_id: 'ada' });
      expect(await attemptsOf(id)).toEqual([
        { status: 'pending', error: null, next_attempt_at: expect.any(Date) },
      ]);

      const disabled = await endpoints.update(
        caller,
        id,
        await updateBody({ status: 'disabled', description: 'paused' }),
      );
      expect(disabled).toMatchObject({ status: 'disabled', description: 'paused' });
      expect(await attemptsOf(id)).toEqual([
        { status: 'failed', error: 'endpoint disabled', next_attempt_at: null },
      ]);
      await emit(caller.organizationId, 'end_user.created', { user_id: 'bob' });
      expect(await attemptsOf(id)).toHaveLength(1);
      await expectAppError(endpoints.ping(caller.organizationId, id), 'webhook_endpoint_disabled');

      // As the failing-endpoints worker leaves it: the reason stays through other changes…
      await database.rows(
        sql`UPDATE webhook_endpoints SET disabled_reason = 'failing', failing_since = now()
             WHERE id = ${id}`,
      );
      const described = await endpoints.update(caller, id, { description: null });
      expect(described).toMatchObject({ description: null, disabled_reason: 'failing' });
      // …and goes, with the failure clock, when the organization sets the status.
      const enabled = await endpoints.update(caller, id, { status: 'enabled' });
      expect(enabled).toMatchObject({ status: 'enabled', disabled_reason: null });
      // Each change is in the audit log, as the PATCH named it.
      const audited = await database.rows<{ actor_id: string; details: unknown }>(
        sql`SELECT actor_id, details FROM audit_events
             WHERE action = 'webhook_endpoint.updated' AND target_id = ${id}`,
      );
      // The events' ids are not in their order: compared as a set.
      expect(audited).toHaveLength(3);
      expect(audited).toEqual(
        expect.arrayContaining([
          { actor_id: caller.userId, details: { status: 'disabled', description: 'paused' } },
          { actor_id: caller.userId, details: { description: null } },
          { actor_id: caller.userId, details: { status: 'enabled' } },
        ]),
      );
      const [row] = await database.rows<{ failing_since: Date | null }>(
        sql`SELECT failing_since FROM webhook_endpoints WHERE id = ${id}`,
      );
      expect(row.failing_since).toBeNull();
      // Events from then on are queued again; the ones missed are not.
      await emit(caller.organizationId, 'end_user.created', { user_id: 'cy' });
      expect((await attemptsOf(id)).map((attempt) => attempt.status)).toEqual([
        'failed',
        'pending',
      ]);
    });

    it('deletes an endpoint with its attempts, in the audit log; then it is gone (not_found)', async () => {
      const caller = await admin();
      const { id, url, events } = await createEndpoint(caller);
      const { event_id } = await endpoints.ping(caller.organizationId, id);
      expect(event_id).toMatch(/^evt_[0-9a-f]{32}$/);
      expect(await attemptsOf(id)).toHaveLength(1);

      await endpoints.remove(caller, id);
      expect(await attemptsOf(id)).toEqual([]);
      const audit = await database.rows<{ action: string; details: unknown }>(
        sql`SELECT action, details FROM audit_events WHERE target_id = ${id} ORDER BY created_at`,
      );
      // Both with the URL's origin and the events, never the secret (docs/webhooks.md).
      const origin = new URL(url).origin;
      expect(audit).toEqual([
        { action: 'webhook_endpoint.created', details: { url: origin, events } },
        { action: 'webhook_endpoint.deleted', details: { url: origin, events } },
      ]);
      await expectAppError(endpoints.remove(caller, id), 'not_found');
      await expectAppError(endpoints.get(caller.organizationId, id), 'not_found');
      await expectAppError(endpoints.update(caller, id, {}), 'not_found');
    });

    it('never lists, reads, changes, deletes, pings or redelivers another organization’s endpoint: not_found', async () => {
      const owner = await admin();
      const stranger = await admin();
      const theirs = await createEndpoint(owner, ['end_user.created']);
      await emit(owner.organizationId, 'end_user.created', { user_id: 'ada' });
      const [delivery] = (await endpoints.deliveries(owner.organizationId, theirs.id, 10)).data;
      const mine = await createEndpoint(stranger, ['end_user.created']);

      expect(await endpoints.list(stranger.organizationId, 10)).toEqual({
        data: [expect.objectContaining({ id: mine.id })],
        has_more: false,
      });
      const foreign = stranger.organizationId;
      for (const call of [
        () => endpoints.get(foreign, theirs.id),
        () => endpoints.update(stranger, theirs.id, { status: 'disabled', description: 'mine' }),
        () => endpoints.update(stranger, theirs.id, { url: `https://${PUBLIC}/stolen` }),
        () => endpoints.remove(stranger, theirs.id),
        () => endpoints.ping(foreign, theirs.id),
        () => endpoints.deliveries(foreign, theirs.id, 10),
        () => endpoints.redeliver(stranger, theirs.id, delivery.id),
        // Their delivery under an endpoint of mine.
        () => endpoints.redeliver(stranger, mine.id, delivery.id),
      ]) {
        await expectAppError(call(), 'not_found');
      }
      // Untouched for its owner: same row, one attempt, no audit event of the stranger's.
      const { secret: _secret, ...shown } = theirs;
      expect(await endpoints.get(owner.organizationId, theirs.id)).toEqual(shown);
      expect(await attemptsOf(theirs.id)).toHaveLength(1);
      const [audit] = await database.rows<{ n: number }>(
        sql`SELECT count(*)::int AS n FROM audit_events WHERE target_id = ${theirs.id}
              AND organization_id <> ${owner.organizationId}`,
      );
      expect(audit.n).toBe(0);
    });
  });

  describe('WebhookEventsService.emit', () => {
    it('writes the event with one attempt per enabled endpoint of the organization subscribed to its type', async () => {
      const caller = await admin();
      const subscribed = await createEndpoint(caller, ['end_user.created', 'member.added']);
      const otherType = await createEndpoint(caller, ['personality.created']);
      const disabled = await createEndpoint(caller, ['end_user.created']);
      await endpoints.update(caller, disabled.id, { status: 'disabled' });
      const elsewhere = await admin();
      const foreign = await createEndpoint(elsewhere, ['end_user.created']);

      await emit(caller.organizationId, 'end_user.created', { user_id: 'ada' });
      const written = await database.rows<{ endpoint_id: string; type: string; data: unknown }>(
        sql`SELECT a.endpoint_id, e.type, e.data, a.attempt, a.status
              FROM webhook_events e JOIN webhook_delivery_attempts a ON a.event_id = e.id
             WHERE e.organization_id = ${caller.organizationId}`,
      );
      expect(written).toEqual([
        {
          endpoint_id: subscribed.id,
          type: 'end_user.created',
          data: { user_id: 'ada' },
          attempt: 1,
          status: 'pending',
        },
      ]);
      for (const id of [otherType.id, disabled.id, foreign.id]) {
        expect(await attemptsOf(id)).toEqual([]);
      }
      // No endpoint subscribed to the type: nothing is written at all.
      await emit(caller.organizationId, 'api_key.revoked', { api_key_id: 'k1' });
      await emit(elsewhere.organizationId, 'member.added', { user_id: 'bob' });
      expect(await countWhere('webhook_events', caller.organizationId)).toBe(1);
      expect(await countWhere('webhook_events', elsewhere.organizationId)).toBe(0);
    });

    it('refuses data with a key named like a secret, at any depth checked, rolling the change back', async () => {
      const caller = await admin();
      await createEndpoint(caller, ['api_key.created']);
      for (const data of [
        { api_key_id: 'k1', key: 'sk_live_x' },
        { api_key: { id: 'k1', Secret: 'whsec_x' } },
        { items: [{ access_token: 't' }] },
      ]) {
        const change = database.transaction(async (manager) => {
          await database.rows(
            sql`INSERT INTO personalities (organization_id, source_slug, source_version, name,
                                           description, traits, voice, system_prompt, replies)
                VALUES (${caller.organizationId}, 'spec', '1', 'Rolled back', 'x', '[]', '{}',
                        'Be kind.', '{}')`,
            { manager },
          );
          await events.emit(manager, caller.organizationId, 'api_key.created', data);
        });
        await expect(change).rejects.toThrow(/must not hold a secret/);
      }
      const [kept] = await database.rows<{ n: number }>(
        sql`SELECT count(*)::int AS n FROM personalities
             WHERE organization_id = ${caller.organizationId}`,
      );
      expect(kept.n).toBe(0);
      expect(await countWhere('webhook_events', caller.organizationId)).toBe(0);
    });
  });

  describe('WebhookDeliveryWorker, to a receiver on loopback', () => {
    let delivering: TestingModule;
    let receiver: WebhookReceiver;

    beforeAll(async () => {
      // Only this spec's attempts could be due (a fresh database per run): ended, so the worker
      // calls nothing but the receiver (the endpoints above point at a public address).
      await database.rows(
        sql`UPDATE webhook_delivery_attempts SET status = 'failed', next_attempt_at = NULL
             WHERE status = 'pending' AND organization_id = ANY (${organizations}::uuid[])`,
      );
      receiver = await new WebhookReceiver().start();
      delivering = await moduleAlone([WebhooksModule], RECEIVER_ENV);
      delivering.get(WebhookDeliveryWorker).start(); // a command never starts it; the server does
    });
    afterAll(async () => {
      await delivering?.close(); // stops the worker before the pool closes
      await receiver?.stop();
    });

    it('POSTs the event signed with the endpoint’s secret (Standard Webhooks), and records the success', async () => {
      const service = delivering.get(WebhookEndpointsService);
      const caller = await admin();
      const path = `ok/${randomUUID()}`;
      const endpoint = await service.create(
        caller,
        await createBody({ url: receiver.url(path), events: ['end_user.deleted'] }),
      );
      await database.transaction((manager) =>
        delivering
          .get(WebhookEventsService)
          .emit(manager, caller.organizationId, 'end_user.deleted', { user_id: 'ada' }),
      );
      await receiver.waitFor(() => receiver.at(`/${path}`).length > 0);

      const [hook] = receiver.at(`/${path}`);
      const headers = hook.headers as Record<string, string>;
      const event = new Webhook(endpoint.secret).verify(hook.body, headers);
      expect(event).toEqual({
        id: expect.stringMatching(/^evt_[0-9a-f]{32}$/),
        type: 'end_user.deleted',
        created_at: expect.any(String),
        organization_id: caller.organizationId,
        data: { user_id: 'ada' },
      });
      expect(headers['webhook-id']).toBe((event as { id: string }).id);
      expect(headers['webhook-signature']).toBe(
        signatureHeaders(
          endpoint.secret,
          headers['webhook-id'],
          Number(headers['webhook-timestamp']),
          hook.body,
        )['webhook-signature'],
      );
      // Another endpoint's secret does not verify it.
      const other = await service.create(
        caller,
        await createBody({ url: receiver.url('ok/other'), events: ['end_user.created'] }),
      );
      expect(() => new Webhook(other.secret).verify(hook.body, headers)).toThrow();

      const deliveries = await eventually(
        async () => {
          const page = await service.deliveries(caller.organizationId, endpoint.id, 10);
          return page.data[0]?.status === 'succeeded' ? page.data : undefined;
        },
        () => 'the attempt to be recorded as succeeded',
      );
      expect(deliveries).toEqual([
        expect.objectContaining({
          event_id: (event as { id: string }).id,
          event_type: 'end_user.deleted',
          attempt: 1,
          status: 'succeeded',
          response_status: 200,
          error: null,
          next_attempt_at: null,
        }),
      ]);
      expect(receiver.at(`/${path}`)).toHaveLength(1);
    });
  });
});
