import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import { connect } from 'node:net';
import { Client } from 'pg';
import { ensureBuilt, runBuilt, runFromSource, waitUntilReady } from './support/built-app';
import { FakeOpenAI, fakeModelEnv } from './support/fake-openai';
import { freePort } from './support/ports';

describe('Graceful shutdown (the real process, as main.ts starts it)', () => {
  it('on SIGTERM finishes the in-flight request, stops, and exits 0', async () => {
    const port = await freePort();
    const service = runFromSource({ PORT: String(port), METRICS_PORT: '0', LOG_LEVEL: 'info' });
    // Compiling src/ on start takes half a minute when the machine is busy (CI runs suites in
    // parallel), hence more than the default wait.
    await waitUntilReady(service, port, 90_000);

    // A request whose body is still arriving when SIGTERM lands.
    const body = JSON.stringify({
      email: `shutdown-${randomUUID()}@example.test`,
      password: 'a long enough password',
    });
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/v1/auth/signup',
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, 10));
      setTimeout(() => {
        service.child.kill('SIGTERM');
        setTimeout(() => req.end(body.slice(10)), 500);
      }, 300);
    });

    const finished = await response;
    expect(finished.status).toBe(201);
    expect(JSON.parse(finished.body).access_token).toEqual(expect.any(String));
    expect(await service.exited).toBe(0);
    expect(service.output()).toContain('"msg":"stopped"');
    // New connections are refused once it has stopped.
    await expect(fetch(`http://127.0.0.1:${port}/health/live`)).rejects.toThrow();
  }, 150_000);
});

describe('Shutdown with an upload that stalls (the built process)', () => {
  it('answers it 408 before SHUTDOWN_TIMEOUT_MS instead of being forced to exit 1 (review)', async () => {
    ensureBuilt();
    const port = await freePort();
    const service = runBuilt('main.js', [], {
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      SHUTDOWN_TIMEOUT_MS: '4000',
    });
    try {
      await waitUntilReady(service, port);
      const socket = connect(port, '127.0.0.1');
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      const closed = new Promise((resolve) => socket.once('close', resolve));
      // Headers and 9 bytes of a declared 100: REQUEST_TIMEOUT_MS (30 s) is far away.
      socket.write(
        'POST /v1/auth/signup HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
          'Content-Length: 100\r\n\r\n{"email":',
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      const signalled = Date.now();
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
      expect(Date.now() - signalled).toBeLessThan(4_000);
      await closed;
      expect(answer).toMatch(/^HTTP\/1\.1 408/);
      expect(service.output()).not.toContain('shutdown timed out');
    } finally {
      await service.stop();
    }
  }, 120_000);
});

describe("Graceful shutdown on the embedded PostgreSQL (the README's `npm start`, built)", () => {
  it('on SIGTERM stops the service before its database, and exits 0 (review)', async () => {
    ensureBuilt();
    const dataDir = mkdtempSync(join(tmpdir(), 'shutdown-embedded-'));
    const port = await freePort();
    const service = runBuilt('main.js', [], {
      DATABASE_URL: '',
      EMBEDDED_PG_DATA_DIR: join(dataDir, 'postgres'),
      EMBEDDED_PG_PORT: String(await freePort()),
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: 'info',
    });
    try {
      await waitUntilReady(service, port, 120_000);
      // The package's own handler stopped the database and exited 143 at once, the workers
      // cut off mid-statement.
      service.child.kill('SIGTERM');
      expect(await service.exited).toBe(0);
      expect(service.output()).toContain('"msg":"stopped"');
      expect(service.output()).not.toContain('terminating connection due to administrator command');
    } finally {
      await service.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});

describe('Shutdown with replies still waiting on their model provider (the built process)', () => {
  let fake: FakeOpenAI | undefined;

  afterAll(async () => {
    await fake?.close();
  });

  it('answers them 503 before SHUTDOWN_TIMEOUT_MS, gives up their Idempotency-Keys, and exits 0 (review)', async () => {
    ensureBuilt();
    fake = await FakeOpenAI.start();
    // The provider would answer in a minute: past every shutdown's patience.
    fake.respondAlwaysWith({ delayMs: 60_000 });
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const service = runBuilt('main.js', [], {
      ...fakeModelEnv(fake),
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      SHUTDOWN_TIMEOUT_MS: '5000',
      RATE_LIMIT_REDIS_PREFIX: `e2e-${randomUUID()}:`,
    });
    await waitUntilReady(service, port);
    const json = async (path: string, body: unknown, auth?: string) => {
      const response = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
        body: JSON.stringify(body),
      });
      return (await response.json()) as Record<string, unknown>;
    };
    const signup = await json('/v1/auth/signup', {
      email: `drain-${randomUUID()}@example.test`,
      password: `pw ${randomUUID()}`,
    });
    const owner = `Bearer ${signup.access_token as string}`;
    const key = await json('/v1/api-keys', { name: 'drain', scopes: ['read_write'] }, owner);
    const auth = `Bearer ${key.key as string}`;
    const personality = await json('/v1/personalities/from-catalog', { slug: 'sage-mentor' }, auth);
    const keys = [`plain-${randomUUID()}`, `stream-${randomUUID()}`];
    const reply = (idempotencyKey: string, stream: boolean) =>
      fetch(`${base}/v1/respond`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: auth,
          'idempotency-key': idempotencyKey,
        },
        body: JSON.stringify({
          personality_id: personality.id,
          user_id: `eu-${randomUUID()}`,
          message: 'hello',
          stream,
        }),
      });
    const plain = reply(keys[0], false);
    const streamed = reply(keys[1], true);
    await fake.waitForRequests(2);
    service.child.kill('SIGTERM');

    const plainAnswer = await plain;
    expect(plainAnswer.status).toBe(503);
    expect(plainAnswer.headers.get('retry-after')).toBe('1');
    expect(((await plainAnswer.json()) as { error: { code: string } }).error.code).toBe(
      'service_unavailable',
    );
    const events = await (await streamed).text();
    expect(events).toContain('event: error');
    expect(events).toContain('"code":"service_unavailable"');
    expect(await service.exited).toBe(0);

    // Given up: a retry elsewhere runs afresh instead of waiting out a lease (409).
    const database = new Client({ connectionString: process.env.DATABASE_URL });
    await database.connect();
    try {
      const { rows } = await database.query<{ held: number }>(
        'SELECT count(*)::int AS held FROM idempotency_keys WHERE key = ANY($1)',
        [keys],
      );
      expect(rows[0].held).toBe(0);
    } finally {
      await database.end();
    }
  }, 120_000);
});
