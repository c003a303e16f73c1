import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Webhook } from 'standardwebhooks';
import { MANUAL_ATTEMPTS_PENDING_MAX } from '../src/webhooks/webhook-endpoints.service';
import { expectError } from './support/assertions';
import { createApiKey, signUp } from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';
import { eventually } from './support/wait';
import { WebhookReceiver } from './support/webhook-receiver';

/**
 * POST /v1/webhook-endpoints/{id}/deliveries/{delivery_id}/redeliver (contract §28): a new
 * attempt of the delivery's event to its endpoint, now, against a real receiver on loopback.
 */
describe('Webhook redelivery (contract §28)', () => {
  let t: TestApp;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    t = await createTestApp({
      env: {
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        WEBHOOK_RETRY_BASE_MS: '60000',
        WEBHOOK_MAX_ATTEMPTS: '2',
        WEBHOOK_TIMEOUT_MS: '1000',
        WEBHOOK_POLL_INTERVAL_MS: '50',
      },
    });
  });
  afterAll(async () => {
    await t.close();
    await receiver.stop();
  });

  async function tenant() {
    const owner = await signUp(t);
    const admin = `Bearer ${await createApiKey(t, owner.accessToken, ['admin'])}`;
    const reader = `Bearer ${await createApiKey(t, owner.accessToken, ['read_write'])}`;
    return { ...owner, admin, reader };
  }

  async function endpoint(auth: string, behaviour: string) {
    const created = await t
      .http()
      .post('/v1/webhook-endpoints')
      .set('Authorization', auth)
      .send({ url: receiver.url(behaviour), events: ['end_user.created'] });
    expect(created.status).toBe(201);
    return created.body as { id: string; secret: string };
  }

  const deliveries = async (auth: string, endpointId: string) =>
    (
      await t
        .http()
        .get(`/v1/webhook-endpoints/${endpointId}/deliveries`)
        .set('Authorization', auth)
    ).body.data as Array<Record<string, unknown>>;

  /** The endpoint's deliveries once `done` holds of them. */
  const deliveriesOnce = (
    auth: string,
    endpointId: string,
    done: (list: Array<Record<string, unknown>>) => boolean,
  ) =>
    eventually(async () => {
      const list = await deliveries(auth, endpointId);
      return done(list) ? list : undefined;
    }, `the deliveries of endpoint ${endpointId}`);

  /** An endpoint of `admin`'s at `path`, pinged once: its delivery, succeeded. */
  async function pingedEndpoint(admin: string, path = `ok/${randomUUID()}`) {
    const hook = await endpoint(admin, path);
    expect((await ping(admin, hook.id)).status).toBe(202);
    const [first] = await deliveriesOnce(admin, hook.id, (list) => list[0]?.status === 'succeeded');
    return { hook, first };
  }

  const ping = (auth: string, endpointId: string) =>
    t.http().post(`/v1/webhook-endpoints/${endpointId}/test`).set('Authorization', auth);

  const redeliver = (auth: string, endpointId: string, deliveryId: string) =>
    t
      .http()
      .post(`/v1/webhook-endpoints/${endpointId}/deliveries/${deliveryId}/redeliver`)
      .set('Authorization', auth);

  const setStatus = async (auth: string, endpointId: string, status: 'enabled' | 'disabled') =>
    expect(
      (
        await t
          .http()
          .patch(`/v1/webhook-endpoints/${endpointId}`)
          .set('Authorization', auth)
          .send({ status })
      ).status,
    ).toBe(200);

  /** `count` more attempts of a delivery's event, pending for a day: an endpoint that drains slowly. */
  const queuePending = (deliveryId: string, count: number) =>
    t.app.get(DataSource).query(
      `INSERT INTO webhook_delivery_attempts
         (organization_id, endpoint_id, event_id, event_type, attempt, next_attempt_at, created_at)
       SELECT organization_id, endpoint_id, event_id, event_type, attempt + 10 + n,
              now() + interval '1 day', now()
         FROM webhook_delivery_attempts, generate_series(1, $2::int) n WHERE id = $1`,
      [deliveryId, count],
    );

  it('sends the same event again, signed, as the next attempt, and audits who asked', async () => {
    const a = await tenant();
    const path = `ok/${randomUUID()}`;
    const hook = await endpoint(a.admin, path);
    const userId = `eu-${randomUUID()}`;
    expect(
      (
        await t
          .http()
          .post('/v1/end-users')
          .set('Authorization', a.reader)
          .send({ user_id: userId })
      ).status,
    ).toBe(201);
    await receiver.waitFor(() => receiver.at(`/${path}`).length === 1);
    const [first] = await deliveriesOnce(
      a.admin,
      hook.id,
      (list) => list[0]?.status === 'succeeded',
    );

    const answer = await redeliver(a.admin, hook.id, first.id as string);
    expect(answer.status).toBe(202);
    expect(answer.body).toEqual({
      id: expect.any(String),
      event_id: first.event_id,
      event_type: 'end_user.created',
      attempt: 2,
      status: 'pending',
      response_status: null,
      error: null,
      duration_ms: null,
      created_at: expect.any(String),
      next_attempt_at: expect.any(String),
    });
    await receiver.waitFor(() => receiver.at(`/${path}`).length === 2, 5_000, 'the redelivery');
    const [original, again] = receiver.at(`/${path}`);
    // The same event (the same webhook-id and body), signed afresh with the endpoint's secret.
    expect(again.headers['webhook-id']).toBe(first.event_id);
    expect(again.body).toBe(original.body);
    expect(
      new Webhook(hook.secret).verify(again.body, again.headers as Record<string, string>),
    ).toMatchObject({ id: first.event_id, type: 'end_user.created', data: { user_id: userId } });
    const list = await deliveriesOnce(
      a.admin,
      hook.id,
      (now) => now[0]?.id === answer.body.id && now[0]?.status === 'succeeded',
    );
    expect(list.map((delivery) => delivery.attempt)).toEqual([2, 1]);
    expect(list[0].response_status).toBe(200);
    expect(typeof list[0].duration_ms).toBe('number');

    const audit = await t
      .http()
      .get('/v1/audit-events?action=webhook_delivery.redelivered')
      .set('Authorization', a.admin);
    expect(audit.status).toBe(200);
    expect(audit.body.data).toEqual([
      expect.objectContaining({
        action: 'webhook_delivery.redelivered',
        actor: { type: 'api_key', id: expect.any(String) },
        target: { type: 'webhook_delivery', id: answer.body.id },
        request_id: answer.headers['x-request-id'],
        details: {
          webhook_endpoint_id: hook.id,
          redelivery_of: first.id,
          event_id: first.event_id,
          event_type: 'end_user.created',
          attempt: 2,
        },
      }),
    ]);
  });

  it('numbers concurrent redeliveries apart, each one attempt', async () => {
    const a = await tenant();
    const path = `ok/${randomUUID()}`;
    const { hook, first } = await pingedEndpoint(a.admin, path);
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => redeliver(a.admin, hook.id, first.id as string)),
    );
    expect(answers.map((answer) => answer.status)).toEqual([202, 202, 202, 202, 202]);
    expect(answers.map((answer) => answer.body.attempt as number).sort()).toEqual([2, 3, 4, 5, 6]);
    await receiver.waitFor(() => receiver.at(`/${path}`).length === 6, 5_000, 'the redeliveries');
  });

  it('redelivers a failed event now, beside its scheduled retry, with no retry of its own past the limit', async () => {
    const a = await tenant();
    const path = `fail/${randomUUID()}`;
    const hook = await endpoint(a.admin, path);
    await ping(a.admin, hook.id);
    // Attempt 1 failed; attempt 2 waits a minute (WEBHOOK_RETRY_BASE_MS).
    const before = await deliveriesOnce(a.admin, hook.id, (list) => list.length === 2);
    expect(before.map((d) => [d.attempt, d.status])).toEqual([
      [2, 'pending'],
      [1, 'failed'],
    ]);
    expect(before[1].response_status).toBe(500);
    const answer = await redeliver(a.admin, hook.id, before[1].id as string);
    expect(answer.status).toBe(202);
    expect(answer.body.attempt).toBe(3);
    const after = await deliveriesOnce(
      a.admin,
      hook.id,
      (list) => list[0]?.attempt === 3 && list[0]?.status === 'failed',
    );
    // Made at once, not a minute later; past WEBHOOK_MAX_ATTEMPTS (2), nothing follows it.
    expect(receiver.at(`/${path}`)).toHaveLength(2);
    expect(after[0]).toMatchObject({ response_status: 500, next_attempt_at: null });
    expect(after[1]).toMatchObject({ attempt: 2, status: 'pending' });
  });

  it('refuses a disabled endpoint (409), a foreign or unknown one (404), and other scopes', async () => {
    const a = await tenant();
    const b = await tenant();
    const { hook, first } = await pingedEndpoint(a.admin);
    const delivery = first.id as string;

    expectError(await redeliver(b.admin, hook.id, delivery), 404, 'not_found');
    const other = await endpoint(a.admin, `ok/${randomUUID()}`);
    expectError(await redeliver(a.admin, other.id, delivery), 404, 'not_found');
    expectError(await redeliver(a.admin, hook.id, randomUUID()), 404, 'not_found');
    expectError(await redeliver(a.admin, hook.id, 'not-a-uuid'), 404, 'not_found');
    expectError(await redeliver(a.reader, hook.id, delivery), 403, 'insufficient_scope');
    expectError(
      await t
        .http()
        .post(`/v1/webhook-endpoints/${hook.id}/deliveries/${delivery}/redeliver`)
        .send(),
      401,
      'unauthenticated',
    );
    expectError(
      await redeliver(a.admin, hook.id, delivery).send({ now: true }),
      400,
      'validation_failed',
    );

    await setStatus(a.admin, hook.id, 'disabled');
    expectError(await redeliver(a.admin, hook.id, delivery), 409, 'webhook_endpoint_disabled');
    expect(await deliveries(a.admin, hook.id)).toHaveLength(1);
    // A user's access token of an owner may (admin scope), as the console does.
    await setStatus(a.admin, hook.id, 'enabled');
    const asOwner = await redeliver(`Bearer ${a.accessToken}`, hook.id, delivery);
    expect(asOwner.status).toBe(202);
    const audit = await t
      .http()
      .get('/v1/audit-events?action=webhook_delivery.redelivered')
      .set('Authorization', a.admin);
    expect(audit.body.data.map((event: { actor: unknown }) => event.actor)).toEqual([
      { type: 'user', id: a.userId },
    ]);
  });

  it('takes no ping or redelivery while MANUAL_ATTEMPTS_PENDING_MAX attempts are pending', async () => {
    const a = await tenant();
    const { hook, first } = await pingedEndpoint(a.admin);
    await queuePending(first.id as string, MANUAL_ATTEMPTS_PENDING_MAX);
    // Under Idempotency-Key: "try again" is not the key's answer for a day.
    const redeliveryKey = `redeliver-${randomUUID()}`;
    const pingKey = `ping-${randomUUID()}`;
    const keyedRedelivery = () =>
      redeliver(a.admin, hook.id, first.id as string).set('Idempotency-Key', redeliveryKey);
    const keyedPing = () => ping(a.admin, hook.id).set('Idempotency-Key', pingKey);
    expectError(await keyedRedelivery(), 409, 'conflict');
    expectError(await keyedPing(), 409, 'conflict');

    // Once two are made, both are taken again, under the same keys, and answered once.
    await t.app.get(DataSource).query(
      `UPDATE webhook_delivery_attempts SET status = 'succeeded', next_attempt_at = NULL
        WHERE endpoint_id = $1
          AND attempt >= (SELECT max(attempt) - 1 FROM webhook_delivery_attempts WHERE endpoint_id = $1)`,
      [hook.id],
    );
    const redelivered = await keyedRedelivery();
    expect(redelivered.status).toBe(202);
    expect(redelivered.headers['idempotent-replayed']).toBeUndefined();
    const pinged = await keyedPing();
    expect(pinged.status).toBe(202);
    const replayed = await keyedPing();
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body).toEqual(pinged.body);
  });

  /** Attempts of `endpointId` not yet made. */
  const pendingOf = async (endpointId: string) =>
    Number(
      (
        await t.app
          .get(DataSource)
          .query(
            `SELECT count(*) AS n FROM webhook_delivery_attempts WHERE endpoint_id = $1 AND status = 'pending'`,
            [endpointId],
          )
      )[0].n,
    );

  it('lets one of a burst of pings take the last pending place, and refuses the rest', async () => {
    const a = await tenant();
    // A receiver that fails: each accepted ping stays pending (its retry waits a minute).
    const hook = await endpoint(a.admin, `fail/${randomUUID()}`);
    expect((await ping(a.admin, hook.id)).status).toBe(202);
    const [first] = await deliveriesOnce(a.admin, hook.id, (list) => list.length > 0);
    await queuePending(first.id as string, MANUAL_ATTEMPTS_PENDING_MAX - 2);
    expect(await pendingOf(hook.id)).toBe(MANUAL_ATTEMPTS_PENDING_MAX - 1);

    const answers = await Promise.all(Array.from({ length: 8 }, () => ping(a.admin, hook.id)));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 202)).toHaveLength(1);
    // The others queue on the endpoint's lock, each for at most a second (the next test): on a
    // busy machine the last in line may be refused for that wait (503) instead of the place.
    expect(statuses.filter((status) => status === 409).length).toBeGreaterThan(0);
    for (const answer of answers.filter((answer) => answer.status !== 202)) {
      if (answer.status === 503) expectError(answer, 503, 'database_timeout');
      else expectError(answer, 409, 'conflict');
    }
    expect(await pendingOf(hook.id)).toBe(MANUAL_ATTEMPTS_PENDING_MAX);
  });

  it("waits for the endpoint's lock at most a second (503, Retry-After), and takes no other organization's", async () => {
    const a = await tenant();
    const other = await tenant();
    const { hook, first } = await pingedEndpoint(a.admin);
    // A transaction holding the endpoint's lock, as a ping stalled on a row lock would.
    const holder = t.app.get(DataSource).createQueryRunner();
    await holder.connect();
    try {
      await holder.startTransaction();
      await holder.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [
        `webhook_manual_attempts:${a.organizationId}:${hook.id}`,
      ]);
      const started = Date.now();
      const waited = await ping(a.admin, hook.id);
      expectError(waited, 503, 'database_timeout');
      expect(waited.headers['retry-after']).toBeDefined();
      expect(Date.now() - started).toBeLessThan(4_000);
      expectError(await redeliver(a.admin, hook.id, first.id as string), 503, 'database_timeout');
      // Another organization naming the endpoint waits for nothing of A's: 404 at once.
      expectError(await ping(other.admin, hook.id), 404, 'not_found');
    } finally {
      await holder.rollbackTransaction();
      await holder.release();
    }
    expect((await ping(a.admin, hook.id)).status).toBe(202);
  });

  it('answers webhook_endpoint_disabled to a disabled endpoint, however many attempts wait', async () => {
    const a = await tenant();
    const { hook, first } = await pingedEndpoint(a.admin);
    await setStatus(a.admin, hook.id, 'disabled');
    // Attempts leased when it was disabled are made and recorded; these stand for them.
    await queuePending(first.id as string, MANUAL_ATTEMPTS_PENDING_MAX);
    expectError(await ping(a.admin, hook.id), 409, 'webhook_endpoint_disabled');
    expectError(
      await redeliver(a.admin, hook.id, first.id as string),
      409,
      'webhook_endpoint_disabled',
    );
  });
});
