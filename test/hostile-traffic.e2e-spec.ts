import { get } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { generateApiKey } from '../src/api-keys/api-key-format';
import { StreamSlots } from '../src/common/streams/stream-slots.service';
import { expectError, expectRequestId } from './support/assertions';
import { clonePersonality, respond, uniqueUserId } from './support/data-plane';
import { signUp, tenantWithKey } from './support/identity';
import { ProbeModule } from './support/probe.module';
import { createTestApp, type TestApp } from './support/test-app';

/** `{"a":{"a":…}}` nested `depth` levels, with `leaf` at the bottom. */
function nested(depth: number, leaf: string): string {
  return '{"a":'.repeat(depth - 1) + `{"a":${leaf}}` + '}'.repeat(depth - 1);
}

async function listen(t: TestApp): Promise<number> {
  if (!t.server.listening) {
    await new Promise<void>((resolve) => t.server.listen(0, '127.0.0.1', resolve));
  }
  return (t.server.address() as AddressInfo).port;
}

/** Resolves with what the server wrote once it closes the socket, or rejects after `withinMs`. */
function closedBy(socket: Socket, withinMs: number): Promise<{ text: string; afterMs: number }> {
  const started = Date.now();
  let text = '';
  socket.on('data', (chunk) => (text += chunk.toString('latin1')));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the socket for ${withinMs} ms`));
    }, withinMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve({ text, afterMs: Date.now() - started });
    });
  });
}

/** The `error` object of a raw HTTP answer read off a socket. */
function envelopeOf(text: string): unknown {
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  return (JSON.parse(body) as { error: unknown }).error;
}

describe('Hostile traffic: bodies, text, dates (contract §14)', () => {
  let t: TestApp;
  let tenant: Awaited<ReturnType<typeof tenantWithKey>>;
  let admin: Awaited<ReturnType<typeof tenantWithKey>>;

  beforeAll(async () => {
    t = await createTestApp({ imports: [ProbeModule] });
    tenant = await tenantWithKey(t, ['read_write']);
    admin = await tenantWithKey(t, ['admin']);
  });
  afterAll(() => t.close());

  const post = (path: string, raw: string, auth?: string) => {
    const request = t.http().post(path).set('Content-Type', 'application/json');
    if (auth) request.set('Authorization', auth);
    return request.send(raw);
  };

  it.each([
    ['100 levels', nested(100, '1')],
    ['5,000 levels', nested(5_000, '1')],
    ['5,000 levels with a \\u escape', nested(5_000, '"\\u0041"')],
    ['5,000 levels holding __proto__', nested(5_000, '{"__proto__":{"x":1}}')],
    ['5,000 levels of arrays', '['.repeat(5_000) + ']'.repeat(5_000)],
  ])('refuses a body nested %s with 400 and keeps serving', async (_name, raw) => {
    for (const path of ['/v1/billing/webhooks', '/v1/auth/login', '/v1/end-users']) {
      const response = await post(path, raw, path === '/v1/end-users' ? tenant.auth : undefined);
      expectError(response, 400, 'validation_failed');
    }
    expect((await t.http().get('/health/live')).status).toBe(200);
  });

  it('accepts 64 levels and refuses 65, counting the body itself', async () => {
    const body = (depth: number) =>
      `{"user_id":"${uniqueUserId('deep')}","metadata":${nested(depth - 1, '1')}}`;
    expect((await post('/v1/end-users', body(64), tenant.auth)).status).toBe(201);
    expectError(await post('/v1/end-users', body(65), tenant.auth), 400, 'validation_failed');
    // Brackets inside strings are text, not nesting.
    const text = JSON.stringify({ user_id: uniqueUserId(), metadata: { note: '['.repeat(500) } });
    expect((await post('/v1/end-users', text, tenant.auth)).status).toBe(201);
  });

  it('refuses an object of more than 1,000 keys, or many wide ones, before copying them (review)', async () => {
    const keys = (count: number) =>
      Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, 0]));
    // 1,000 keys of metadata (8 KiB, within its 16) are taken.
    const fits = JSON.stringify({ user_id: uniqueUserId('wide'), metadata: keys(1_000) });
    expect((await post('/v1/end-users', fits, tenant.auth)).status).toBe(201);
    const wide = JSON.stringify({ user_id: uniqueUserId('wide'), metadata: keys(1_001) });
    const refused = await post('/v1/end-users', wide, tenant.auth);
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.error.details).toEqual([
      { field: 'body', problem: 'must not hold an object of more than 1000 keys' },
    ]);
    // Unauthenticated: 90,000 unknown keys at the top of a login (1 MiB) held the event loop 8 s.
    // (What the body limit takes of them: 80,000.)
    const login = JSON.stringify({ email: 'a@example.com', password: 'x', ...keys(80_000) });
    expectError(await post('/v1/auth/login', login), 400, 'validation_failed');
    // Five objects of 999 keys; but a thousand of 30 are taken.
    const wideObjects = (count: number, width: number) =>
      JSON.stringify({
        user_id: uniqueUserId('wide'),
        metadata: { list: Array.from({ length: count }, () => keys(width)) },
      });
    const tooMany = await post('/v1/end-users', wideObjects(5, 999), tenant.auth);
    expectError(tooMany, 400, 'validation_failed');
    expect(tooMany.body.error.details).toEqual([
      {
        field: 'body',
        problem:
          'must not hold so many wide objects: each counts the square of its keys, 4000000 in all',
      },
    ]);
    const narrow = await post('/v1/end-users', wideObjects(1_000, 30), tenant.auth);
    expectError(narrow, 400, 'validation_failed');
    expect(narrow.body.error.details).toEqual([
      { field: 'metadata', problem: expect.stringContaining('16') },
    ]);
  });

  it('refuses more than 50,000 objects and arrays, or 200,000 values, before copying them (review)', async () => {
    const list = (count: number, item: string) =>
      `{"user_id":"${uniqueUserId('many')}","x":[${Array.from({ length: count }, () => item).join(',')}]}`;
    // 330,000 empty objects (1 MiB) under an unknown field: 0.4 s of the event loop each, before.
    const objects = await post('/v1/end-users', list(330_000, '{}'), tenant.auth);
    expectError(objects, 400, 'validation_failed');
    expect(objects.body.error.details).toEqual([
      { field: 'body', problem: 'must not hold more than 50000 objects and arrays' },
    ]);
    const zeros = await post('/v1/end-users', list(250_000, '0'), tenant.auth);
    expectError(zeros, 400, 'validation_failed');
    expect(zeros.body.error.details).toEqual([
      { field: 'body', problem: 'must not hold more than 200000 values in its objects and arrays' },
    ]);
    // Below both, the body is read: the unknown field is what is refused.
    const below = await post('/v1/end-users', list(40_000, '[]'), tenant.auth);
    expectError(below, 400, 'validation_failed');
    expect(below.body.error.details).toEqual([{ field: 'x', problem: 'is not a known field' }]);
  });

  it('refuses a compressed body with 415, before anything is inflated or read (review)', async () => {
    // 1 KB of gzip was 1 MiB of JSON, parsed and copied for anyone before any guard.
    const compressed = gzipSync(JSON.stringify({ email: 'a@example.com', password: 'x' }));
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const response = await t
        .http()
        .post('/v1/auth/login')
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', encoding)
        .send(compressed);
      expectError(response, 415, 'unsupported_media_type');
      expect(response.body.error.message).toBe('Send the body without a Content-Encoding');
    }
    const identity = await t
      .http()
      .post('/v1/end-users')
      .set('Authorization', tenant.auth)
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'identity')
      .send(JSON.stringify({ user_id: uniqueUserId('identity') }));
    expect(identity.status).toBe(201);
  });

  it('refuses metadata holding a number JSON cannot write, stored as null before (review)', async () => {
    const body = (number: string) =>
      `{"user_id":"${uniqueUserId('number')}","metadata":{"n":${number}}}`;
    const refused = await post('/v1/end-users', body('1e309'), tenant.auth);
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.error.details).toEqual([
      {
        field: 'metadata',
        problem: 'metadata must not hold a number JSON cannot write (too large for a double, at n)',
      },
    ]);
    const taken = await post('/v1/end-users', body('1.7e308'), tenant.auth);
    expect(taken.status).toBe(201);
    expect(taken.body.metadata).toEqual({ n: 1.7e308 });
  });

  it('tells valid JSON of the wrong type (validation_failed) from text that is not JSON', async () => {
    for (const raw of ['"hello"', '42', 'null', 'true', '[{"user_id":"x"}]']) {
      expectError(await post('/v1/end-users', raw, tenant.auth), 400, 'validation_failed');
    }
    expectError(await post('/v1/end-users', '{"user_id":', tenant.auth), 400, 'malformed_json');
  });

  it.each([
    ['__proto__', '{"user_id":"x","metadata":{"__proto__":{"admin":true}}}'],
    ['constructor', '{"user_id":"x","metadata":{"constructor":{"prototype":{"a":1}}}}'],
    ['prototype', '{"user_id":"x","metadata":{"list":[{"prototype":1}]}}'],
    ['an escaped __proto__', '{"user_id":"x","metadata":{"\\u005f_proto__":{"a":1}}}'],
    // Object.prototype's other members: class-transformer's copy dropped them without a word,
    // beside the DTO's fields (no unknown field) and in metadata (the key lost; review).
    ['toString beside the fields', '{"user_id":"x","toString":1}'],
    ['valueOf in metadata', '{"user_id":"x","metadata":{"valueOf":"kept?","a":1}}'],
    ['hasOwnProperty deep', '{"user_id":"x","metadata":{"l":[{"hasOwnProperty":1}]}}'],
    ['__lookupGetter__', '{"user_id":"x","metadata":{"__lookupGetter__":1}}'],
  ])('refuses the key %s at any depth', async (_name, raw) => {
    const response = await post('/v1/end-users', raw, tenant.auth);
    expectError(response, 400, 'validation_failed');
    expect(response.body.error.details).toEqual([
      expect.objectContaining({ problem: 'is not an allowed key' }),
    ]);
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('refuses U+0000 and unpaired surrogates in body strings and keys, never storing them', async () => {
    const personalityId = await clonePersonality(t, tenant.auth);
    const cases: Array<[string, string, string]> = [
      ['POST', '/v1/end-users', '{"user_id":"nul\\u0000id"}'],
      ['POST', '/v1/end-users', '{"user_id":"\\ud800"}'],
      ['POST', '/v1/end-users', '{"user_id":"\\udc00"}'],
      ['POST', '/v1/end-users', '{"user_id":"ok","metadata":{"note":"a\\u0000b"}}'],
      ['POST', '/v1/end-users', '{"user_id":"ok","metadata":{"k\\u0000":1}}'],
      ['POST', '/v1/end-users', '{"user_id":"ok","metadata":{"k":["\\udbff"]}}'],
      ['PATCH', `/v1/personalities/${personalityId}`, '{"name":"a\\u0000"}'],
      ['PATCH', `/v1/personalities/${personalityId}`, '{"system_prompt":"\\ud83d"}'],
      [
        'POST',
        '/v1/respond',
        `{"personality_id":"${personalityId}","user_id":"u1","message":"hi\\u0000"}`,
      ],
      ['POST', '/v1/personalities/from-catalog', '{"slug":"sage\\u0000"}'],
    ];
    for (const [method, path, raw] of cases) {
      const response = await t
        .http()
        [method === 'POST' ? 'post' : 'patch'](path)
        .set('Authorization', tenant.auth)
        .set('Content-Type', 'application/json')
        .send(raw);
      expectError(response, 400, 'validation_failed');
    }
    // Two different lone surrogates never collapse into one stored user_id; a pair is fine.
    const emoji = `smile-\ud83d\ude00-${uniqueUserId()}`;
    const created = await t
      .http()
      .post('/v1/end-users')
      .set('Authorization', tenant.auth)
      .send({ user_id: emoji });
    expect(created.status).toBe(201);
    expect(created.body.user_id).toBe(emoji);
  });

  it('refuses a body whose bytes are not UTF-8 rather than storing U+FFFD for them', async () => {
    // A lone surrogate written as UTF-8 bytes (ED A0 80), a stray continuation byte, a cut
    // sequence: each would decode to U+FFFD.
    for (const bytes of [[0xed, 0xa0, 0x80], [0x80], [0xe2, 0x82]]) {
      const raw = Buffer.concat([
        Buffer.from('{"user_id":"bytes-'),
        Buffer.from(bytes),
        Buffer.from('"}'),
      ]);
      const response = await t
        .http()
        .post('/v1/end-users')
        .set('Authorization', tenant.auth)
        .set('Content-Type', 'application/json')
        .serialize((bytes: string) => bytes) // the Buffer as it is, not as JSON of a Buffer
        .send(raw);
      expectError(response, 400, 'malformed_json');
      expect(response.body.error.message).toBe('The body is not UTF-8 text');
    }
    // What the decoder would have made of them: never stored.
    for (const decoded of ['bytes-\ufffd\ufffd\ufffd', 'bytes-\ufffd']) {
      await t
        .http()
        .get(`/v1/end-users/${encodeURIComponent(decoded)}`)
        .set('Authorization', tenant.auth)
        .expect(404);
    }
    // A byte order mark and a four-byte character are UTF-8, and taken.
    const userId = `bom-${uniqueUserId()}-\u{1F600}`;
    const created = await t
      .http()
      .post('/v1/end-users')
      .set('Authorization', tenant.auth)
      .set('Content-Type', 'application/json')
      .serialize((bytes: string) => bytes)
      .send(
        Buffer.concat([
          Buffer.from([0xef, 0xbb, 0xbf]),
          Buffer.from(JSON.stringify({ user_id: userId })),
        ]),
      );
    expect(created.status).toBe(201);
    expect(created.body.user_id).toBe(userId);
  });

  it('refuses U+0000, unpaired surrogates and broken escapes in paths and query strings', async () => {
    const urls = [
      '/v1/end-users/abc%00def',
      '/v1/end-users/%ED%A0%80',
      '/v1/end-users/%E0%A4%A',
      '/v1/end-users?starting_after=%00',
      '/v1/end-users?starting_after=%ED%B0%80',
      '/v1/usage/active-relationships?month=2026-11%00',
      '/v1/personalities?starting_after=%C0%AF',
    ];
    for (const url of urls) {
      expectError(
        await t.http().get(url).set('Authorization', tenant.auth),
        400,
        'validation_failed',
      );
    }
    // Percent-encoded text that is valid stays valid.
    const userId = `café ${uniqueUserId()}`;
    await t
      .http()
      .post('/v1/end-users')
      .set('Authorization', tenant.auth)
      .send({ user_id: userId });
    const found = await t
      .http()
      .get(`/v1/end-users/${encodeURIComponent(userId)}`)
      .set('Authorization', tenant.auth);
    expect(found.status).toBe(200);
  });

  it('refuses months and timestamps outside the years 1970..9999', async () => {
    for (const month of ['0000-01', '1969-12', '10000-01', '-2026-01']) {
      expectError(
        await t
          .http()
          .get(`/v1/usage/active-relationships?month=${month}`)
          .set('Authorization', tenant.auth),
        400,
        'validation_failed',
      );
    }
    const ok = await t
      .http()
      .get('/v1/usage/active-relationships?month=1970-01')
      .set('Authorization', tenant.auth);
    expect(ok.body).toEqual({ month: '1970-01', active_relationships: 0 });
    for (const expiresAt of [
      '0000-01-01T00:00:00Z',
      '1969-12-31T23:59:59Z',
      '+275760-09-13T00:00:00Z',
    ]) {
      expectError(
        await t
          .http()
          .post('/v1/api-keys')
          .set('Authorization', admin.auth)
          .send({ name: 'k', scopes: ['read'], expires_at: expiresAt }),
        400,
        'validation_failed',
      );
    }
  });

  it('refuses a body with fields on endpoints that take none', async () => {
    for (const path of [
      '/v1/billing/payment-methods',
      '/v1/billing/subscription/suspend',
      '/v1/billing/subscription/resume',
    ]) {
      const withField = await t
        .http()
        .post(path)
        .set('Authorization', admin.auth)
        .send({ price_id: 'price_123' });
      expectError(withField, 400, 'validation_failed');
      expect(withField.body.error.details).toEqual([
        { field: 'price_id', problem: 'is not a known field' },
      ]);
      // No body, or an empty object, reaches the endpoint (here: billing is not configured).
      expectError(
        await t.http().post(path).set('Authorization', admin.auth),
        503,
        'billing_not_configured',
      );
      expectError(
        await t.http().post(path).set('Authorization', admin.auth).send({}),
        503,
        'billing_not_configured',
      );
    }
    const userId = uniqueUserId();
    await t
      .http()
      .post('/v1/end-users')
      .set('Authorization', tenant.auth)
      .send({ user_id: userId });
    expectError(
      await t
        .http()
        .delete(`/v1/end-users/${userId}`)
        .set('Authorization', tenant.auth)
        .send({ force: true }),
      400,
      'validation_failed',
    );
  });

  it('sends nosniff on every response, and no-store with secrets', async () => {
    const responses = [
      await t.http().get('/health/live'),
      await t.http().get('/v1/no-such-route'),
      await t.http().get('/v1/end-users'),
      await post('/v1/end-users', '{', tenant.auth),
      await t.http().get('/v1/vocabularies/emotions'),
    ];
    for (const response of responses) {
      expect(response.headers['x-content-type-options']).toBe('nosniff');
      expectRequestId(response);
    }
    const owner = await signUp(t);
    const login = await t
      .http()
      .post('/v1/auth/login')
      .send({ email: owner.email, password: owner.password });
    const key = await t
      .http()
      .post('/v1/api-keys')
      .set('Authorization', `Bearer ${owner.accessToken}`)
      .send({ name: 'k', scopes: ['read'] });
    const signup = await t
      .http()
      .post('/v1/auth/signup')
      .send({ email: `x-${uniqueUserId()}@example.test`, password: 'a long enough password' });
    for (const response of [login, key, signup]) {
      expect(response.status).toBeLessThan(300);
      expect(response.headers['cache-control']).toBe('no-store');
    }
    expect((await t.http().get('/v1/vocabularies/emotions')).headers['cache-control']).not.toBe(
      'no-store',
    );
    // Every answer to a request with credentials: personal data, its errors too.
    const bearer = { Authorization: `Bearer ${owner.accessToken}` };
    for (const response of [
      await t.http().get('/v1/me').set(bearer),
      await t.http().get('/v1/organizations').set(bearer),
      await t.http().get('/v1/end-users').set('Authorization', tenant.auth),
      await t.http().get('/v1/end-users/nobody/memories').set('Authorization', tenant.auth),
      await t.http().get('/v1/end-users').set('Authorization', 'Bearer not-a-key'),
    ]) {
      expect(response.headers['cache-control']).toBe('no-store');
    }
  });

  it('logs a 500 by its error, never by the request content', async () => {
    const secret = `secret-${uniqueUserId()}`;
    const response = await post(
      '/v1/test-probe/query-fails',
      JSON.stringify({ name: secret, count: 1 }),
    );
    expectError(response, 500, 'internal_error');
    const lines = t.logs.forRequest(response.headers['x-request-id']);
    const text = JSON.stringify(lines);
    expect(text).not.toContain(secret);
    expect(lines).toContainEqual(
      expect.objectContaining({
        status: 500,
        err: expect.objectContaining({ type: 'QueryFailedError', code: '22P02' }),
      }),
    );
    expect(t.logs.text()).not.toContain(secret);
  });
});

describe('Hostile traffic: credential floods and the auth bucket', () => {
  it('pays for each key lookup from the IP bucket: forged keys get 429 after the burst', async () => {
    const t = await createTestApp({
      // In-process buckets: Redis's fail-open fallback (a slow answer under load) would add tokens.
      env: { RATE_LIMIT_IP_RPS: '0.01', RATE_LIMIT_IP_BURST: '5', REDIS_URL: undefined },
    });
    try {
      const lookups = countApiKeyLookups(t);
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) {
        const response = await t
          .http()
          .get('/v1/end-users')
          .set('Authorization', `Bearer ${generateApiKey()}`);
        statuses.push(response.status);
      }
      expect(statuses).toEqual([...Array(5).fill(401), ...Array(15).fill(429)]);
      expect(lookups()).toBe(5);
    } finally {
      await t.close();
    }
  });

  it('looks one forged key up at most once a minute', async () => {
    const t = await createTestApp();
    try {
      const lookups = countApiKeyLookups(t);
      const forged = `Bearer ${generateApiKey()}`;
      for (let i = 0; i < 20; i++) {
        expectError(
          await t.http().get('/v1/end-users').set('Authorization', forged),
          401,
          'unauthenticated',
        );
      }
      expect(lookups()).toBe(1);
      // A real key is unaffected; created on this instance, it is known here without a lookup.
      const tenant = await tenantWithKey(t, ['read']);
      for (let i = 0; i < 5; i++) {
        expect((await t.http().get('/v1/end-users').set('Authorization', tenant.auth)).status).toBe(
          200,
        );
      }
      expect(lookups()).toBe(1);
    } finally {
      await t.close();
    }
  });

  it('draws sign-ups from the auth bucket', async () => {
    const t = await createTestApp({
      // In-process buckets: argon2 blocks the loop past the Redis timeout, which fails open.
      env: { RATE_LIMIT_AUTH_RPS: '0.01', RATE_LIMIT_AUTH_BURST: '2', REDIS_URL: undefined },
    });
    try {
      const signup = () =>
        t
          .http()
          .post('/v1/auth/signup')
          .send({ email: `s-${uniqueUserId()}@example.test`, password: 'a long enough password' });
      const first = await signup();
      expect(first.status).toBe(201);
      expect(first.headers['ratelimit-policy']).toMatch(/^"auth";/);
      expect((await signup()).status).toBe(201);
      expectError(await signup(), 429, 'rate_limited');
    } finally {
      await t.close();
    }
  });
});

/** Counts the statements that look an API key up by its hash, at the driver. */
function countApiKeyLookups(t: TestApp): () => number {
  let count = 0;
  const pool = (
    t.app.get(DataSource).driver as unknown as {
      master: { on(event: 'acquire', listener: (client: Client) => void): void };
    }
  ).master;
  pool.on('acquire', (client: Client) => {
    const marked = client as Client & { countingLookups?: boolean };
    if (marked.countingLookups) return;
    marked.countingLookups = true;
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
      const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string })?.text;
      if (text?.includes('FROM api_keys WHERE key_hash')) count++;
      return query(...args);
    };
  });
  return () => count;
}

describe('Hostile traffic: slow clients (REQUEST_TIMEOUT_MS, HEADERS_TIMEOUT_MS, keep-alive)', () => {
  let t: TestApp;
  let port: number;

  beforeAll(async () => {
    t = await createTestApp({ env: { REQUEST_TIMEOUT_MS: '3000', HEADERS_TIMEOUT_MS: '1500' } });
    port = await listen(t);
  });
  afterAll(() => t.close());

  /** A raw connection; half-open, it keeps its side open once the server has ended its own. */
  const open = (allowHalfOpen = false) =>
    new Promise<Socket>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1', allowHalfOpen }, () => resolve(socket));
    });

  it('closes a connection whose headers have not arrived within HEADERS_TIMEOUT_MS', async () => {
    const socket = await open();
    const closed = closedBy(socket, 5_000);
    socket.write('GET /health/live HTTP/1.1\r\nHost: x\r\n');
    const { text, afterMs } = await closed;
    expect(afterMs).toBeGreaterThanOrEqual(1_400);
    expect(afterMs).toBeLessThan(3_000);
    expect(text === '' || text.startsWith('HTTP/1.1 408')).toBe(true);
  });

  it('answers 408 to a body that has not arrived within REQUEST_TIMEOUT_MS', async () => {
    const socket = await open();
    const closed = closedBy(socket, 8_000);
    socket.write(
      'POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"email":',
    );
    const { text, afterMs } = await closed;
    expect(afterMs).toBeGreaterThanOrEqual(2_900);
    expect(afterMs).toBeLessThan(5_500);
    expect(text).toMatch(/^HTTP\/1\.1 408/);
    expect(envelopeOf(text)).toMatchObject({ status: 408, code: 'request_timeout' });
    // One access line, the request's own, under the id the client got (review: a second one,
    // 499 under an id never sent, came with the refusal's).
    const requestId = (envelopeOf(text) as { request_id: string }).request_id;
    const lines = () => t.logs.entries().filter((line) => line.requestId === requestId);
    for (let waited = 0; lines().length === 0 && waited < 3_000; waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(lines()).toEqual([
      expect.objectContaining({
        method: 'POST',
        // Refused while its body was read, before routing.
        path: '(unmatched)',
        status: 408,
        code: 'request_timeout',
      }),
    ]);
    expect(t.logs.entries().filter((line) => line.status === 499)).toEqual([]);
  });

  it('closes quietly a connection that sends nothing within HEADERS_TIMEOUT_MS (a preconnect)', async () => {
    const refusals = () => t.logs.entries().filter((line) => line.msg === 'request refused');
    const before = refusals().length;
    const socket = await open();
    const { text, afterMs } = await closedBy(socket, 5_000);
    expect(text).toBe('');
    expect(afterMs).toBeLessThan(3_000);
    expect(refusals()).toHaveLength(before);
  });

  it('answers an HTTP/1.1 request without Host, and a CONNECT, with an envelope (review)', async () => {
    // Before: a bare 400 from Node without id or envelope, and a socket closed without a word.
    const noHost = await open();
    const answered = closedBy(noHost, 5_000);
    noHost.write('GET /health/ready HTTP/1.1\r\nConnection: close\r\n\r\n');
    const { text } = await answered;
    expect(text).toMatch(/^HTTP\/1\.1 400/);
    expect(text).toMatch(/\r\nX-Request-Id: [0-9A-Z]{26}\r\n/i);
    expect(envelopeOf(text)).toMatchObject({
      status: 400,
      code: 'validation_failed',
      details: [{ field: 'host', problem: 'must be sent (HTTP/1.1)' }],
    });
    // HTTP/1.0 may leave Host out.
    const older = await open();
    const served = closedBy(older, 5_000);
    older.write('GET /health/live HTTP/1.0\r\n\r\n');
    expect((await served).text).toMatch(/^HTTP\/1\.1 200/);
    const tunnel = await open();
    const refused = closedBy(tunnel, 5_000);
    tunnel.write('CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n');
    const tunnelled = await refused;
    expect(tunnelled.text).toMatch(/^HTTP\/1\.1 405/);
    expect(envelopeOf(tunnelled.text)).toMatchObject({ status: 405, code: 'method_not_allowed' });
    // Its access line names the method the parser read, not "(unparsed)".
    const tunnelId = (envelopeOf(tunnelled.text) as { request_id: string }).request_id;
    expect(t.logs.forRequest(tunnelId)).toEqual([
      expect.objectContaining({ msg: 'request refused', method: 'CONNECT', status: 405 }),
    ]);
    // A CONNECT whose client resets at once ended the process (review of the change); one that
    // never closes its side is closed by the server.
    for (let i = 0; i < 5; i++) {
      const reset = await open();
      reset.write('CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n');
      reset.resetAndDestroy();
    }
    const lingering = await open(true);
    lingering.resume();
    const refusedToo = new Promise((resolve) => lingering.once('end', resolve));
    const gone = new Promise((resolve) => {
      lingering.once('error', resolve);
      lingering.once('close', resolve);
    });
    lingering.write('CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n');
    await refusedToo;
    // Its side still open: what it writes now meets a closed socket (a reset), not one kept.
    await new Promise((resolve) => setTimeout(resolve, 200));
    lingering.write('more');
    setTimeout(() => lingering.writable && lingering.write('more'), 100);
    await expect(
      Promise.race([gone.then(() => 'closed'), new Promise((r) => setTimeout(r, 2_000, 'kept'))]),
    ).resolves.toBe('closed');
    lingering.destroy();
    expect((await t.http().get('/health/live')).status).toBe(200);
  });

  it('answers an over-long request line with a 431 envelope, not a bare status line', async () => {
    const socket = await open();
    const closed = closedBy(socket, 5_000);
    socket.write(`GET /v1/audit-events?limit=${'9'.repeat(17_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    const { text } = await closed;
    expect(text).toMatch(/^HTTP\/1\.1 431/);
    const requestId = /\r\nX-Request-Id: ([0-9A-Z]{26})\r\n/.exec(text)?.[1];
    expect(requestId).toBeDefined();
    expect(text).toContain('\r\nX-Content-Type-Options: nosniff\r\n');
    expect(envelopeOf(text)).toEqual({
      status: 431,
      code: 'headers_too_large',
      message: expect.any(String),
      request_id: requestId,
    });
    // Refused before any middleware ran, and still in the access log: no path, no method read.
    expect(t.logs.forRequest(requestId!)).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'request refused',
        method: '(unparsed)',
        path: '(unmatched)',
        status: 431,
        code: 'headers_too_large',
      }),
    ]);
    // Longer than a request id (26 characters), which may hold a run of nines by chance.
    const logged = JSON.stringify(t.logs.forRequest(requestId!));
    expect(logged).not.toContain('9'.repeat(64));
    expect(logged).not.toContain('limit=');
  });

  it('answers text that is not HTTP with a 400 envelope', async () => {
    const socket = await open();
    const closed = closedBy(socket, 5_000);
    socket.write('HELLO THERE\r\n\r\n');
    const { text } = await closed;
    expect(text).toMatch(/^HTTP\/1\.1 400/);
    expect(envelopeOf(text)).toMatchObject({ status: 400, code: 'validation_failed' });
  });

  it('closes an idle keep-alive connection after 5 s', async () => {
    const socket = await open();
    const closed = closedBy(socket, 9_000);
    socket.write('GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
    const { text, afterMs } = await closed;
    expect(text).toMatch(/^HTTP\/1\.1 200/);
    expect(afterMs).toBeGreaterThanOrEqual(4_900);
    expect(afterMs).toBeLessThan(7_000);
  });
});

describe('Hostile traffic: stalled streams (STREAMS_PER_ORG, STREAM_IDLE_TIMEOUT_MS)', () => {
  jest.setTimeout(120_000);
  let t: TestApp;
  let port: number;
  let hoarder: Awaited<ReturnType<typeof tenantWithKey>>;
  let userId: string;

  beforeAll(async () => {
    t = await createTestApp({ env: { STREAM_IDLE_TIMEOUT_MS: '2000' } });
    port = await listen(t);
    hoarder = await tenantWithKey(t, ['read_write']);
    const personalityId = await clonePersonality(t, hoarder.auth);
    userId = uniqueUserId('hoard');
    await respond(t, hoarder.auth, {
      personality_id: personalityId,
      user_id: userId,
      message: 'hi',
    });
    // ~20 MB of memories: more than socket buffers hold, so a stalled reader stalls the server.
    await t.app.get(DataSource).query(
      `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content)
       SELECT organization_id, end_user_id, personality_id, 'user', repeat('x', 400)
         FROM memories m, generate_series(1, 50000)
        WHERE m.end_user_id = (SELECT id FROM end_users WHERE user_id = $1) AND m.role = 'user'`,
      [userId],
    );
  });
  afterAll(() => t.close());

  /** Starts an export and never reads past the status line. */
  function stalledExport(): Promise<{ status: number; requestId: string; close: () => void }> {
    return new Promise((resolve, reject) => {
      const request = get(
        {
          host: '127.0.0.1',
          port,
          path: `/v1/end-users/${encodeURIComponent(userId)}/export`,
          headers: { authorization: hoarder.auth },
        },
        (response) => {
          response.pause();
          resolve({
            status: response.statusCode ?? 0,
            requestId: String(response.headers['x-request-id']),
            close: () => request.destroy(),
          });
        },
      );
      request.on('error', (error) => (request.destroyed ? undefined : reject(error)));
    });
  }

  it('gives an organization 4 streams, refuses the rest, and keeps other tenants fast', async () => {
    const stalled = await Promise.all(Array.from({ length: 10 }, () => stalledExport()));
    const started = Date.now();
    const statuses = stalled.map((s) => s.status).sort();
    expect(statuses).toEqual([...Array(4).fill(200), ...Array(6).fill(429)]);
    const refused = await t
      .http()
      .get(`/v1/end-users/${encodeURIComponent(userId)}/model`)
      .set('Authorization', hoarder.auth);
    expectError(refused, 429, 'too_many_streams');
    expect(refused.headers['retry-after']).toMatch(/^\d+$/);

    // Another organization, and readiness, answer while the 4 exports are stalled.
    const other = await tenantWithKey(t, ['read_write']);
    for (let i = 0; i < 20; i++) {
      const started = Date.now();
      const [list, ready] = await Promise.all([
        t.http().get('/v1/end-users').set('Authorization', other.auth),
        t.http().get('/health/ready'),
      ]);
      expect([list.status, ready.status]).toEqual([200, 200]);
      expect(Date.now() - started).toBeLessThan(1_000);
    }
    const idle = await t.app.get(DataSource).query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'idle in transaction'
            AND now() - state_change > interval '1 second'`,
    );
    expect(idle[0].n).toBe(0);

    // Read nothing for STREAM_IDLE_TIMEOUT_MS (2 s): the server ends the streams, unfinished,
    // and gives their slots back. (Their socket buffers, several MB each, fill first; on a busy
    // 2-core machine that alone has taken 15 s.)
    const slots = t.app.get(StreamSlots);
    while (slots.heldBy(hoarder.organizationId) > 0) {
      expect(Date.now() - started).toBeLessThan(45_000);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const { requestId } of stalled.filter((s) => s.status === 200)) {
      expect(t.logs.forRequest(requestId)).toContainEqual(
        expect.objectContaining({ status: 200, aborted: true }),
      );
    }
    for (const s of stalled) s.close();
    const again = await t
      .http()
      .get(`/v1/end-users/${encodeURIComponent(userId)}/model`)
      .set('Authorization', hoarder.auth)
      .timeout(30_000);
    expect(again.status).toBe(200);
    expect(again.body.tables.memories).toHaveLength(50_002);
  });
});
