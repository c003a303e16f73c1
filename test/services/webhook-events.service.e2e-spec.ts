import type { TestingModule } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { UserCaller } from '../../src/common/auth/caller';
import { Clock, ManualClock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import type { WebhookDeliveryDto } from '../../src/webhooks/dto/webhook-delivery.dto';
import { WebhookEndpointsService } from '../../src/webhooks/webhook-endpoints.service';
import { publicEventId, type SubscribableEventType } from '../../src/webhooks/webhook-event-types';
import { WebhookEventsService } from '../../src/webhooks/webhook-events.service';
import { WebhooksModule } from '../../src/webhooks/webhooks.module';
import { WebhooksRepository } from '../../src/webhooks/webhooks.repository';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { sessionsWaitingForLocks } from '../support/locks';
import { moduleAlone } from '../support/module-alone';

/** Events are kept this long once their attempts are made (docs/webhooks.md). */
const RETENTION_MS = 30 * 86_400_000;

/**
 * The webhooks module alone on a real PostgreSQL, without HTTP ("medium" spec), time a
 * ManualClock: the outbox as WebhookEventsService writes it (the Clock's time on the event and
 * its first attempts, the erasure's end_user.deleted notices, the secret check's depth and exact
 * names), the events read back as an endpoint's deliveries (newest first, paged, ties kept
 * apart), redeliveries of them, and the retention purge. Endpoints are written straight into
 * webhook_endpoints: their own rules are test/services/webhooks.service.e2e-spec.ts's, as are
 * emit's basic fan-out, secret refusal and cross-organization not_found. No worker runs (a
 * command never starts it), so every attempt stays as written.
 */
describe('WebhookEventsService: the outbox and its deliveries (real database)', () => {
  const clock = new ManualClock(Date.parse('2031-07-01T08:00:00.000Z'));
  let moduleRef: TestingModule;
  let events: WebhookEventsService;
  let endpoints: WebhookEndpointsService;
  let repository: WebhooksRepository;
  let database: Database;
  let factory: Factory;

  beforeAll(async () => {
    moduleRef = await moduleAlone(
      [WebhooksModule],
      { WEBHOOK_ALLOW_PRIVATE_URLS: 'false', WEBHOOK_ALLOWED_PORTS: undefined },
      (builder) => builder.overrideProvider(Clock).useValue(clock),
    );
    events = moduleRef.get(WebhookEventsService);
    endpoints = moduleRef.get(WebhookEndpointsService);
    repository = moduleRef.get(WebhooksRepository);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterAll(() => moduleRef?.close());

  async function admin(): Promise<UserCaller> {
    const organizationId = await factory.organization();
    return { kind: 'user', organizationId, userId: randomUUID(), scopes: ['admin'] };
  }

  /** An endpoint of the organization subscribed to `types`, as a create stores it. */
  async function endpoint(
    organizationId: string,
    types: SubscribableEventType[],
    status: 'enabled' | 'disabled' = 'enabled',
  ): Promise<string> {
    const [row] = await database.rows<{ id: string }>(
      sql`INSERT INTO webhook_endpoints (organization_id, url, events, secret, status)
          VALUES (${organizationId}, ${`https://93.184.215.14/hook/${randomUUID()}`},
                  ${types}::text[], 'whsec_never-sent', ${status})
          RETURNING id`,
    );
    return row.id;
  }

  /** What another module does: the change and its event in one transaction. */
  function emit(
    organizationId: string,
    type: SubscribableEventType,
    data: Record<string, unknown>,
  ): Promise<void> {
    return database.transaction((manager) => events.emit(manager, organizationId, type, data));
  }

  async function eventsOf(organizationId: string) {
    return database.rows<{ id: string; type: string; data: unknown; created_at: Date }>(
      sql`SELECT id, type, data, created_at FROM webhook_events
           WHERE organization_id = ${organizationId} ORDER BY created_at, id`,
    );
  }

  /** Every delivery of the endpoint, page by page, `limit` a page. */
  async function allDeliveries(
    organizationId: string,
    endpointId: string,
    limit: number,
  ): Promise<WebhookDeliveryDto[][]> {
    const pages: WebhookDeliveryDto[][] = [];
    let after: string | undefined;
    for (;;) {
      const page = await endpoints.deliveries(organizationId, endpointId, limit, after);
      pages.push(page.data);
      if (!page.has_more) return pages;
      after = page.data.at(-1)!.id;
    }
  }

  describe('emit', () => {
    it('dates the event and its first attempts by the Clock, due at once, one event for all endpoints', async () => {
      const caller = await admin();
      const [first, second] = [
        await endpoint(caller.organizationId, ['member.added']),
        await endpoint(caller.organizationId, ['member.added', 'member.removed']),
      ];
      const changedAt = clock.now();
      await emit(caller.organizationId, 'member.added', { user_id: 'ada', role: 'member' });

      const [event] = await eventsOf(caller.organizationId);
      expect(event).toEqual({
        id: expect.any(String),
        type: 'member.added',
        data: { user_id: 'ada', role: 'member' },
        created_at: changedAt,
      });
      for (const endpointId of [first, second]) {
        expect(await endpoints.deliveries(caller.organizationId, endpointId, 10)).toEqual({
          data: [
            {
              id: expect.any(String),
              event_id: publicEventId(event.id),
              event_type: 'member.added',
              attempt: 1,
              status: 'pending',
              response_status: null,
              error: null,
              duration_ms: null,
              created_at: changedAt.toISOString(),
              next_attempt_at: changedAt.toISOString(),
            },
          ],
          has_more: false,
        });
      }
      expect(publicEventId(event.id)).toMatch(/^evt_[0-9a-f]{32}$/);
    });

    it('refuses a secret’s name down to the eighth level, and only the exact names', async () => {
      const caller = await admin();
      await endpoint(caller.organizationId, ['subscription.updated']);
      // Eight objects down from the data: the deepest level the check walks.
      let deep: Record<string, unknown> = { client_secret: 'cs_x' };
      for (let level = 0; level < 8; level++) deep = { nested: deep };
      await expect(emit(caller.organizationId, 'subscription.updated', deep)).rejects.toThrow(
        /must not hold a secret \(key "client_secret"\)/,
      );
      await expect(
        emit(caller.organizationId, 'subscription.updated', { AUTHORIZATION: 'Bearer x' }),
      ).rejects.toThrow(/must not hold a secret/);
      expect(await eventsOf(caller.organizationId)).toEqual([]);

      // Names that contain a secret's name, and secret-sounding values, are facts: sent as is.
      const facts = {
        api_key_id: 'k1',
        token_count: 3,
        secret_santa: false,
        field: 'password',
        items: [{ keyboard: 'qwerty' }],
      };
      await emit(caller.organizationId, 'subscription.updated', facts);
      expect((await eventsOf(caller.organizationId)).map((event) => event.data)).toEqual([facts]);
    });
  });

  describe('announceErasure', () => {
    it('sends end_user.deleted for each erased end user to its own organization, dated by the Clock', async () => {
      const [a, b, c] = [await admin(), await admin(), await admin()];
      const aEndpoint = await endpoint(a.organizationId, ['end_user.deleted']);
      // B subscribes to creations only; C's endpoint is disabled.
      await endpoint(b.organizationId, ['end_user.created']);
      await endpoint(c.organizationId, ['end_user.deleted'], 'disabled');
      clock.advance(1_000);
      const erasedAt = clock.now().toISOString();

      const erased = [
        { id: randomUUID(), organizationId: a.organizationId, userId: 'ada' },
        { id: randomUUID(), organizationId: b.organizationId, userId: 'ada' },
        { id: randomUUID(), organizationId: a.organizationId, userId: 'bob' },
        { id: randomUUID(), organizationId: c.organizationId, userId: 'cy' },
      ];
      await database.transaction((manager) => events.announceErasure(manager, erased));

      expect((await eventsOf(a.organizationId)).map(({ type, data }) => ({ type, data }))).toEqual(
        expect.arrayContaining([
          { type: 'end_user.deleted', data: { user_id: 'ada', deleted_at: erasedAt } },
          { type: 'end_user.deleted', data: { user_id: 'bob', deleted_at: erasedAt } },
        ]),
      );
      expect(await eventsOf(a.organizationId)).toHaveLength(2);
      expect(await eventsOf(b.organizationId)).toEqual([]);
      expect(await eventsOf(c.organizationId)).toEqual([]);
      const deliveries = await endpoints.deliveries(a.organizationId, aEndpoint, 10);
      expect(deliveries.data.map((delivery) => [delivery.event_type, delivery.attempt])).toEqual([
        ['end_user.deleted', 1],
        ['end_user.deleted', 1],
      ]);

      // In the erasure's transaction: rolled back with it, no notice is left.
      const failed = database.transaction(async (manager) => {
        await events.announceErasure(manager, [
          { id: randomUUID(), organizationId: a.organizationId, userId: 'dee' },
        ]);
        throw new Error('the erasure failed after its notice');
      });
      await expect(failed).rejects.toThrow('the erasure failed');
      expect(await eventsOf(a.organizationId)).toHaveLength(2);
    });
  });

  describe('deliveries of the events', () => {
    it('lists an endpoint’s attempts newest first, paged without loss when events share an instant', async () => {
      const caller = await admin();
      const endpointId = await endpoint(caller.organizationId, ['personality.created']);
      // Three events at one instant (ties broken by id), then two later ones.
      for (const name of ['a', 'b', 'c']) {
        await emit(caller.organizationId, 'personality.created', { name });
      }
      clock.advance(1_000);
      await emit(caller.organizationId, 'personality.created', { name: 'd' });
      clock.advance(1_000);
      await emit(caller.organizationId, 'personality.created', { name: 'e' });

      const single = (await endpoints.deliveries(caller.organizationId, endpointId, 10)).data;
      expect(single).toHaveLength(5);
      const times = single.map((delivery) => delivery.created_at);
      expect(times).toEqual([...times].sort().reverse());
      const written = await eventsOf(caller.organizationId);
      const nameOf = (delivery: WebhookDeliveryDto) =>
        (
          written.find((event) => publicEventId(event.id) === delivery.event_id)?.data as {
            name: string;
          }
        ).name;
      expect(single.slice(0, 2).map(nameOf)).toEqual(['e', 'd']);

      for (const limit of [1, 2, 4]) {
        const pages = await allDeliveries(caller.organizationId, endpointId, limit);
        expect({ limit, pages: pages.map((page) => page.length) }).toEqual({
          limit,
          pages: limit === 1 ? [1, 1, 1, 1, 1] : limit === 2 ? [2, 2, 1] : [4, 1],
        });
        expect(pages.flat()).toEqual(single);
      }

      // A cursor from another endpoint's list (of this organization or another) positions
      // nothing: an empty page, not that list's rows.
      const other = await endpoint(caller.organizationId, ['personality.created']);
      const stranger = await admin();
      const theirs = await endpoint(stranger.organizationId, ['personality.created']);
      await emit(stranger.organizationId, 'personality.created', { name: 'x' });
      const [foreignDelivery] = (await endpoints.deliveries(stranger.organizationId, theirs, 1))
        .data;
      expect(
        await endpoints.deliveries(caller.organizationId, endpointId, 10, foreignDelivery.id),
      ).toEqual({ data: [], has_more: false });
      expect(await endpoints.deliveries(caller.organizationId, other, 10, single[0].id)).toEqual({
        data: [],
        has_more: false,
      });
      // An endpoint subscribed after the events: none of them.
      expect(await endpoints.deliveries(caller.organizationId, other, 10)).toEqual({
        data: [],
        has_more: false,
      });
    });

    it('redelivers the same event, numbered after its last attempt, due now; concurrent ones take successive numbers', async () => {
      const caller = await admin();
      const endpointId = await endpoint(caller.organizationId, ['api_key.revoked']);
      await emit(caller.organizationId, 'api_key.revoked', { api_key_id: 'k9' });
      const [original] = (await endpoints.deliveries(caller.organizationId, endpointId, 10)).data;

      clock.advance(60_000);
      const redeliveredAt = clock.now().toISOString();
      const again = await Promise.all(
        [1, 2, 3].map(() => endpoints.redeliver(caller, endpointId, original.id)),
      );
      expect(again.map((delivery) => delivery.attempt).sort()).toEqual([2, 3, 4]);
      for (const delivery of again) {
        expect(delivery).toMatchObject({
          event_id: original.event_id,
          event_type: 'api_key.revoked',
          status: 'pending',
          created_at: redeliveredAt,
          next_attempt_at: redeliveredAt,
        });
      }
      // Redelivering the first attempt again goes on after the last one.
      clock.advance(1_000);
      expect((await endpoints.redeliver(caller, endpointId, original.id)).attempt).toBe(5);
      // Still one event: a redelivery adds attempts, never events.
      expect(await eventsOf(caller.organizationId)).toHaveLength(1);

      // A disabled endpoint receives nothing.
      await database.count(
        sql`UPDATE webhook_endpoints SET status = 'disabled' WHERE id = ${endpointId}`,
      );
      await expectAppError(
        endpoints.redeliver(caller, endpointId, original.id),
        'webhook_endpoint_disabled',
      );
      const listed = (await endpoints.deliveries(caller.organizationId, endpointId, 10)).data;
      // Newest first; the three made at one instant in id order, whatever their numbers.
      const attempts = listed.map((delivery) => delivery.attempt);
      expect([attempts[0], attempts.slice(1, 4).sort(), attempts[4]]).toEqual([5, [2, 3, 4], 1]);
      expect(attempts).toHaveLength(5);
    });
  });

  describe('retention', () => {
    it('purges events older than 30 days whose attempts are all made, with their attempts; keeps the others', async () => {
      const caller = await admin();
      const endpointId = await endpoint(caller.organizationId, ['usage.threshold_reached']);
      const now = clock.nowMs();
      const emitAt = async (ms: number, threshold: number) => {
        clock.set(new Date(ms));
        await emit(caller.organizationId, 'usage.threshold_reached', { threshold });
      };
      try {
        await emitAt(now - RETENTION_MS - 2 * 86_400_000, 50); // old, attempt made
        await emitAt(now - RETENTION_MS - 86_400_000, 80); // old, attempt made
        await emitAt(now - RETENTION_MS - 60_000, 100); // old, but its attempt still pending
        await emitAt(now - RETENTION_MS + 60_000, 101); // inside the 30 days, attempt made
      } finally {
        clock.set(new Date(now));
      }
      await database.count(
        sql`UPDATE webhook_delivery_attempts SET status = 'failed', next_attempt_at = NULL
             WHERE endpoint_id = ${endpointId}
               AND event_id IN (SELECT id FROM webhook_events
                                 WHERE organization_id = ${caller.organizationId}
                                   AND (data->>'threshold')::int <> 100)`,
      );

      const cutoff = new Date(now - RETENTION_MS);
      // In batches of at most the size asked, until none is left. The database is the whole
      // run's: other specs' old events go too, so only this organization's are counted below.
      expect(await repository.deleteEventsCreatedBefore(cutoff, 1)).toBe(1);
      for (let batches = 0; (await repository.deleteEventsCreatedBefore(cutoff, 1_000)) > 0;) {
        expect((batches += 1)).toBeLessThan(1_000);
      }
      expect(await repository.deleteEventsCreatedBefore(cutoff, 1_000)).toBe(0);

      const kept = await eventsOf(caller.organizationId);
      expect(kept.map((event) => (event.data as { threshold: number }).threshold)).toEqual([
        100, 101,
      ]);
      const attempts = (await endpoints.deliveries(caller.organizationId, endpointId, 10)).data;
      expect(attempts.map((attempt) => attempt.event_id).sort()).toEqual(
        kept.map((event) => publicEventId(event.id)).sort(),
      );
    });
  });

  describe('lock order of the recorder and the disabling of failing endpoints', () => {
    /** Runs `check` while a session of its own holds `hold` in a transaction. */
    async function whileHolding(
      hold: { text: string; values: unknown[] },
      check: (observer: Client) => Promise<void>,
    ): Promise<void> {
      const holder = new Client({ connectionString: process.env.DATABASE_URL });
      const observer = new Client({ connectionString: process.env.DATABASE_URL });
      await Promise.all([holder.connect(), observer.connect()]);
      try {
        await holder.query('BEGIN');
        await holder.query(hold.text, hold.values);
        await check(observer);
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        await Promise.all([holder.end(), observer.end()]);
      }
    }

    /** Whether `sql` can lock the row at once, from `observer` (then let go). */
    async function lockableAtOnce(observer: Client, text: string, id: string): Promise<boolean> {
      await observer.query('BEGIN');
      try {
        await observer.query(`${text} FOR UPDATE NOWAIT`, [id]);
        return true;
      } catch (error) {
        if ((error as { code?: string }).code === '55P03') return false;
        throw error;
      } finally {
        await observer.query('ROLLBACK');
      }
    }

    it('disables failing endpoints locking them in id order, not the order they lie in', async () => {
      const caller = await admin();
      let [low, high] = ['', ''];
      let placed: Array<{ id: string }> = [];
      // The spec's premise: the higher id lies first in the table. Written first, it usually
      // does; the free space other suites leave can put the second row on an earlier page (seen
      // once in CI), so the pair is written again until it lies so.
      for (let attempt = 0; attempt < 5 && placed[0]?.id !== high; attempt++) {
        if (attempt > 0) {
          await database.count(sql`DELETE FROM webhook_endpoints WHERE id IN (${low}, ${high})`);
        }
        [low, high] = [randomUUID(), randomUUID()].sort();
        for (const id of [high, low]) {
          await database.count(
            sql`INSERT INTO webhook_endpoints
                  (id, organization_id, url, events, secret, status, failing_since)
                VALUES (${id}, ${caller.organizationId}, 'https://93.184.215.14/hook',
                        '{member.added}', 'whsec_never-sent', 'enabled',
                        ${clock.now()}::timestamptz - interval '100 hours')`,
          );
        }
        placed = await database.rows<{ id: string }>(
          sql`SELECT id FROM webhook_endpoints WHERE id IN (${low}, ${high}) ORDER BY ctid`,
        );
      }
      expect(placed.map((row) => row.id)).toEqual([high, low]);
      let disabling: Promise<unknown> | undefined;
      await whileHolding(
        { text: 'SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR UPDATE', values: [low] },
        async (observer) => {
          disabling = repository.disableFailing(clock.now(), clock.now());
          await sessionsWaitingForLocks(database, 1);
          // Waiting for the lower id, it holds nothing yet: the higher is free.
          expect(
            await lockableAtOnce(observer, 'SELECT 1 FROM webhook_endpoints WHERE id = $1', high),
          ).toBe(true);
        },
      );
      const disabled = (await disabling) as Array<{ id: string }>;
      expect(disabled.map((row) => row.id).sort()).toEqual(
        expect.arrayContaining([low, high].sort()),
      );
    });

    it('purges old events locking their attempts’ endpoints first, as a DELETE does: the two cannot deadlock', async () => {
      const caller = await admin();
      const endpointId = await endpoint(caller.organizationId, ['usage.threshold_reached']);
      const now = clock.nowMs();
      clock.set(new Date(now - RETENTION_MS - 86_400_000));
      try {
        await emit(caller.organizationId, 'usage.threshold_reached', { threshold: 50 });
      } finally {
        clock.set(new Date(now));
      }
      const [attempt] = await database.rows<{ id: string }>(
        sql`UPDATE webhook_delivery_attempts SET status = 'failed', next_attempt_at = NULL
             WHERE endpoint_id = ${endpointId} RETURNING id`,
      );

      // A DELETE of the endpoint has locked its row and is about to cascade to the attempts.
      let purging: Promise<number> | undefined;
      await whileHolding(
        {
          text: 'SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR UPDATE',
          values: [endpointId],
        },
        async (observer) => {
          purging = repository.deleteEventsCreatedBefore(new Date(now - RETENTION_MS), 1_000);
          await sessionsWaitingForLocks(database, 1);
          // The purge waits for the endpoint holding no attempt: the cascade could go on.
          expect(
            await lockableAtOnce(
              observer,
              'SELECT 1 FROM webhook_delivery_attempts WHERE id = $1',
              attempt.id,
            ),
          ).toBe(true);
        },
      );
      expect(await purging).toBeGreaterThanOrEqual(1);
      expect(
        await database.rows(sql`SELECT 1 FROM webhook_delivery_attempts WHERE id = ${attempt.id}`),
      ).toEqual([]);
    });

    describe('recording attempts', () => {
      it('locks the endpoint before its attempt, as a DELETE does: the two cannot deadlock', async () => {
        const caller = await admin();
        const endpointId = await endpoint(caller.organizationId, ['member.added']);
        await emit(caller.organizationId, 'member.added', { user_id: 'ada', role: 'member' });
        // The worker's claim, by hand (no worker runs here).
        const lockToken = randomUUID();
        const [attempt] = await database.rows<{ id: string }>(
          sql`UPDATE webhook_delivery_attempts SET lock_token = ${lockToken},
                   locked_until = ${clock.now()}::timestamptz + interval '1 minute'
             WHERE endpoint_id = ${endpointId} RETURNING id`,
        );

        // A DELETE of the endpoint has locked its row and is about to cascade to the attempts.
        let recording: Promise<void> | undefined;
        await whileHolding(
          {
            text: 'SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR UPDATE',
            values: [endpointId],
          },
          async (observer) => {
            recording = repository.recordOutcomes(
              [
                {
                  id: attempt.id,
                  lockToken,
                  endpointId,
                  status: 'failed',
                  responseStatus: 500,
                  error: 'answered 500',
                  durationMs: 12,
                  retryInMs: 60_000,
                },
              ],
              clock.now(),
            );
            await sessionsWaitingForLocks(database, 1);
            // The recorder waits for the endpoint holding no attempt: the cascade could go on.
            expect(
              await lockableAtOnce(
                observer,
                'SELECT 1 FROM webhook_delivery_attempts WHERE id = $1',
                attempt.id,
              ),
            ).toBe(true);
          },
        );
        await recording;
        const attempts = await database.rows<{ attempt: number; status: string }>(
          sql`SELECT attempt, status FROM webhook_delivery_attempts
             WHERE endpoint_id = ${endpointId} ORDER BY attempt`,
        );
        expect(attempts).toEqual([
          { attempt: 1, status: 'failed' },
          { attempt: 2, status: 'pending' },
        ]);
      });
    });
  });
});
