import { createServer, Server, Socket } from 'node:net';
import { ShutdownSignal } from '../src/common/lifecycle/shutdown-signal';
import { expectError, expectRequestId, ULID } from './support/assertions';
import { tenantWithKey } from './support/identity';
import { ProbeModule } from './support/probe.module';
import { createTestApp, TestApp } from './support/test-app';
import { eventually } from './support/wait';

describe('Foundation: request ids, error envelope, logs, bad input', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ imports: [ProbeModule] });
  });
  afterAll(() => t.close());

  it('gives every response a new ULID and ignores an incoming X-Request-Id', async () => {
    const first = await t.http().get('/health/live').set('X-Request-Id', 'spoofed');
    const second = await t.http().get('/health/live');
    expect(first.status).toBe(200);
    expect(first.headers['x-request-id']).toMatch(ULID);
    expect(first.headers['x-request-id']).not.toBe('spoofed');
    expect(second.headers['x-request-id']).not.toBe(first.headers['x-request-id']);
  });

  it('answers an unknown route or method with 404 not_found', async () => {
    expectError(await t.http().get('/v1/no-such-thing'), 404, 'not_found');
    expectError(await t.http().delete('/v1/vocabularies/emotions'), 404, 'not_found');
    expectError(await t.http().get('/'), 404, 'not_found');
  });

  it("names an unknown route's method and path, never its query, and at most 200 characters of it", async () => {
    const misplaced = await t.http().get('/v1/no-such-thing?api_key=pk_live_secret');
    expectError(misplaced, 404, 'not_found');
    expect(misplaced.body.error.message).toBe('Cannot GET /v1/no-such-thing');
    const long = await t.http().get(`/v1/${'a'.repeat(5_000)}`);
    expectError(long, 404, 'not_found');
    expect(long.body.error.message).toBe(`Cannot GET /v1/${'a'.repeat(196)}…`);
    // Any method Node accepts, hyphen and all (found by review: M-SEARCH kept its query).
    const searched = await t.http()['m-search']('/v1/no-such-thing?api_key=pk_live_secret');
    expect(searched.body.error.message).toBe('Cannot M-SEARCH /v1/no-such-thing');
  });

  it('answers malformed JSON with 400 malformed_json', async () => {
    const response = await t
      .http()
      .post('/v1/test-probe/echo')
      .set('Content-Type', 'application/json')
      .send('{"name": "a",');
    expectError(response, 400, 'malformed_json');
  });

  it('answers valid JSON that is not an object (a string, an array) with 400 validation_failed', async () => {
    const text = await t
      .http()
      .post('/v1/test-probe/echo')
      .set('Content-Type', 'application/json')
      .send('"hello"');
    expectError(text, 400, 'validation_failed');
    const array = await t
      .http()
      .post('/v1/test-probe/echo')
      .set('Content-Type', 'application/json')
      .send('[1,2]');
    expectError(array, 400, 'validation_failed');
  });

  it('answers a body over 1 MiB with 413 payload_too_large', async () => {
    const big = JSON.stringify({ name: 'x', count: 1, pad: 'y'.repeat(1024 * 1024) });
    const response = await t
      .http()
      .post('/v1/test-probe/echo')
      .set('Content-Type', 'application/json')
      .send(big);
    expectError(response, 413, 'payload_too_large');
  });

  it('answers a body that is not application/json with 415', async () => {
    const plain = await t
      .http()
      .post('/v1/test-probe/echo')
      .set('Content-Type', 'text/plain')
      .send('name=a');
    expectError(plain, 415, 'unsupported_media_type');
    const form = await t
      .http()
      .post('/v1/test-probe/echo')
      .type('form')
      .send({ name: 'a', count: 1 });
    expectError(form, 415, 'unsupported_media_type');
  });

  it('rejects unknown fields, wrong types and huge numbers with details', async () => {
    const unknown = await t
      .http()
      .post('/v1/test-probe/echo')
      .send({ name: 'a', count: 1, admin: true });
    expectError(unknown, 400, 'validation_failed');
    expect(unknown.body.error.details).toEqual([
      { field: 'admin', problem: 'is not a known field' },
    ]);

    const wrong = await t.http().post('/v1/test-probe/echo').send({ name: 5 });
    expectError(wrong, 400, 'validation_failed');
    const fields = (wrong.body.error.details as Array<{ field: string }>).map(
      (detail) => detail.field,
    );
    expect(new Set(fields)).toEqual(new Set(['name', 'count']));

    const huge = await t
      .http()
      .post('/v1/test-probe/echo')
      .set('Content-Type', 'application/json')
      .send('{"name":"a","count":1e400}');
    expectError(huge, 400, 'validation_failed');
  });

  it('rejects NUL bytes and __proto__ keys without touching prototypes', async () => {
    const nul = await t.http().post('/v1/test-probe/echo').send({ name: 'a\u0000b', count: 1 });
    expectError(nul, 400, 'validation_failed');

    const proto = await t
      .http()
      .post('/v1/test-probe/echo')
      .set('Content-Type', 'application/json')
      .send('{"name":"a","count":1,"__proto__":{"polluted":true}}');
    expect(proto.status).toBe(400);
    expectError(proto, 400, 'validation_failed');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();

    const ok = await t.http().post('/v1/test-probe/echo').send({ name: 'a', count: 2 });
    expect(ok.status).toBe(201);
    expect(ok.body).toEqual({ name: 'a', count: 2, prototype_untouched: true });
  });

  it('answers an unexpected error with 500 internal_error, no details, and logs it once with the id', async () => {
    const response = await t.http().post('/v1/test-probe/boom');
    expectError(response, 500, 'internal_error');
    expect(JSON.stringify(response.body)).not.toContain('hunter2');
    expect(JSON.stringify(response.body)).not.toContain('Error');
    const id = response.headers['x-request-id'];
    const lines = t.logs.forRequest(id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'error',
      status: 500,
      method: 'POST',
      path: '/v1/test-probe/boom',
    });
    expect(JSON.stringify(lines[0].err)).toContain('hunter2');
  });

  it('writes one JSON line per request with requestId, method, path, status and duration', async () => {
    const response = await t.http().get('/v1/vocabularies/emotions/changelog?limit=2');
    const id = expectRequestId(response);
    const lines = t.logs.forRequest(id);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      requestId: id,
      method: 'GET',
      path: '/v1/vocabularies/emotions/changelog',
      status: 200,
      duration_ms: expect.any(Number),
    });
  });

  it('names the route template and hashes path parameters: a user_id never appears in a line', async () => {
    const tenant = await tenantWithKey(t, ['read_write']);
    const userId = 'ada.lovelace@example.com';
    const created = await t
      .http()
      .post('/v1/end-users')
      .set('Authorization', tenant.auth)
      .send({ user_id: userId });
    expect(created.status).toBe(201);
    const read = await t
      .http()
      .get(`/v1/end-users/${encodeURIComponent(userId)}`)
      .set('Authorization', tenant.auth);
    const again = await t
      .http()
      .get(`/v1/end-users/${encodeURIComponent(userId)}/memories`)
      .set('Authorization', tenant.auth);
    const [line] = t.logs.forRequest(expectRequestId(read));
    const [other] = t.logs.forRequest(expectRequestId(again));
    expect(line).toMatchObject({
      path: '/v1/end-users/:user_id',
      params: { user_id: expect.stringMatching(/^[0-9a-f]{16}$/) },
    });
    // The same id hashes alike, so lines about one end user still correlate.
    expect(other).toMatchObject({
      path: '/v1/end-users/:user_id/memories',
      params: { user_id: (line.params as { user_id: string }).user_id },
    });
    const unmatched = await t.http().get(`/v1/nowhere/${encodeURIComponent(userId)}`);
    const [lost] = t.logs.forRequest(expectRequestId(unmatched));
    expect(lost).toMatchObject({
      path: '(unmatched)',
      path_hash: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    expect(t.logs.text()).not.toContain('ada.lovelace');
  });

  it('logs a line with the id even for a body the parser refused', async () => {
    const response = await t
      .http()
      .post('/v1/test-probe/echo')
      .set('Content-Type', 'application/json')
      .send('{');
    const lines = t.logs.forRequest(response.headers['x-request-id']);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ status: 400 });
  });

  it('never logs credentials, cookies or passwords', async () => {
    await t
      .http()
      .post('/v1/test-probe/echo')
      .set('Authorization', 'Bearer pk_live_secretsecretsecret')
      .set('Cookie', 'session=cookie-secret-value')
      .send({ name: 'a', count: 1, password: 'my-password-123456', token: 'reset-token-secret' });
    const text = t.logs.text();
    for (const secret of [
      'pk_live_secretsecretsecret',
      'cookie-secret-value',
      'my-password-123456',
      'reset-token-secret',
    ]) {
      expect(text).not.toContain(secret);
    }
  });
});

describe('Health', () => {
  it('answers live and ready; ready and requests are 503 while the database is unreachable, and 200 again after', async () => {
    // A TCP relay between the app and PostgreSQL that the test can cut and restore.
    const target = new URL(process.env.DATABASE_URL!);
    const sockets = new Set<Socket>();
    let relay: Server | undefined;
    const openRelay = (port: number) =>
      new Promise<number>((resolve) => {
        relay = createServer((client) => {
          const upstream = new Socket();
          upstream.connect(Number(target.port || 5432), target.hostname);
          client.pipe(upstream).pipe(client);
          for (const socket of [client, upstream]) {
            sockets.add(socket);
            socket.on('error', () => undefined);
            socket.on('close', () => sockets.delete(socket));
          }
        });
        relay.listen(port, '127.0.0.1', () => resolve((relay!.address() as { port: number }).port));
      });
    const closeRelay = () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        relay!.close(() => resolve());
      });

    const port = await openRelay(0);
    const relayed = new URL(target.toString());
    relayed.hostname = '127.0.0.1';
    relayed.port = String(port);
    const t = await createTestApp({ env: { DATABASE_URL: relayed.toString() } });
    try {
      expect((await t.http().get('/health/live')).status).toBe(200);
      const up = await t.http().get('/health/ready');
      expect(up.status).toBe(200);
      expect(up.body).toMatchObject({ status: 'ok', checks: { database: { status: 'up' } } });

      // An access token never used yet: its checks (version, membership) are not cached.
      const signup = await t
        .http()
        .post('/v1/auth/signup')
        .send({ email: 'outage@example.com', password: 'a long passphrase' });
      expect(signup.status).toBe(201);

      await closeRelay();
      const down = await t.http().get('/health/ready');
      expectError(down, 503, 'not_ready');
      expect(down.body.error.checks).toEqual({ database: { status: 'down' } });
      // A request that needs the database: 503 to retry in a moment, not a 500 (review).
      const refused = await t
        .http()
        .post('/v1/auth/login')
        .send({ email: 'nobody@example.com', password: 'a long passphrase' });
      expectError(refused, 503, 'service_unavailable');
      expect(refused.headers['retry-after']).toBe('1');
      // So is a valid access token whose checks cannot be read: the credential is not at fault,
      // and a 401 would have the client drop it (review).
      const withToken = await t
        .http()
        .get('/v1/end-users')
        .set('Authorization', `Bearer ${signup.body.access_token}`);
      expectError(withToken, 503, 'service_unavailable');

      await openRelay(port);
      // The pool reconnects on its next checkout.
      const again = await eventually(
        async () => {
          const ready = await t.http().get('/health/ready');
          return ready.status === 200 ? ready : undefined;
        },
        'readiness once the database is back',
        5_000,
      );
      expect(again.status).toBe(200);
      expectRequestId(again);
    } finally {
      await t.close().catch(() => undefined);
      await closeRelay().catch(() => undefined);
    }
  });
});

// Its own app, in a describe of its own: two apps of one describe interfere (see rate-limit).
describe('Health during a shutdown', () => {
  it('fails readiness once a shutdown has begun, while liveness stays up (review)', async () => {
    const stopping = await createTestApp();
    try {
      expect((await stopping.http().get('/health/ready')).status).toBe(200);
      stopping.app.get(ShutdownSignal).begin();
      const ready = await stopping.http().get('/health/ready');
      expectError(ready, 503, 'not_ready');
      expect(ready.body.error.checks).toEqual({ shutdown: { status: 'stopping' } });
      expect((await stopping.http().get('/health/live')).status).toBe(200);
    } finally {
      await stopping.close();
    }
  });
});
