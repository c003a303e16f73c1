import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { DataSource } from 'typeorm';
import { expectError, expectRequestId } from './support/assertions';
import { ShiftedClock, stopClockAt } from './support/clocks';
import { signUp } from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';
import { eventually } from './support/wait';
import { API_KEY_CACHE_MS } from '../src/api-keys/api-keys.service';
import { Clock } from '../src/common/time/clock';
import { REDIS_CLIENT, type RedisClient } from '../src/redis/redis.module';
import { SHARED_REDIS_URL, sharedRedisAnswers, startOwnRedis } from './support/redis-server';

const PUBLIC = '/v1/vocabularies/emotions/changelog';
const ORG_ROUTE = '/v1/api-keys';
const redisAvailable = sharedRedisAnswers('rate-limit e2e', 'the shared-bucket test is');
// Skipped only on a developer's machine without Redis: under CI the test runs, and fails.
const itWithRedis = redisAvailable || process.env.CI ? it : it.skip;

/**
 * The headers every response carries (contract §5 and the IETF draft pair). `now` is the app's
 * time: the real one unless the test moves the app's clock.
 */
function expectRateLimitHeaders(
  response: Response,
  policy: 'org' | 'ip' | 'auth',
  now = Date.now(),
): void {
  const headers = response.headers;
  expect(headers['x-ratelimit-limit']).toMatch(/^\d+(\.\d+)?$/);
  expect(headers['x-ratelimit-remaining']).toMatch(/^\d+$/);
  const reset = headers['x-ratelimit-reset'];
  expect(new Date(reset).toISOString()).toBe(reset);
  expect(Date.parse(reset)).toBeGreaterThan(now - 1_000);
  expect(headers['ratelimit-policy']).toMatch(new RegExp(`^"${policy}";q=\\d+;w=\\d+$`));
  expect(headers.ratelimit).toMatch(new RegExp(`^"${policy}";r=\\d+;t=\\d+$`));
  expect(headers.ratelimit).toContain(`r=${headers['x-ratelimit-remaining']};`);
}

/**
 * `retryAfter` is the wait right after the bucket ran dry; the time the requests since took on a
 * busy machine may have brought it down by a second or two, never below 1.
 */
function expectRateLimited(response: Response, retryAfter: number): void {
  expectError(response, 429, 'rate_limited');
  expect(response.headers['retry-after']).toMatch(/^\d+$/);
  const seconds = Number(response.headers['retry-after']);
  expect(seconds).toBeLessThanOrEqual(retryAfter);
  expect(seconds).toBeGreaterThanOrEqual(Math.max(1, retryAfter - 2));
  expect(response.headers['x-ratelimit-remaining']).toBe('0');
}

/** When the bucket a response reported on is full again, on the app's clock. */
function resetOf(response: Response): number {
  return Date.parse(response.headers['x-ratelimit-reset']);
}

/** An organization with an admin API key, made through the API (which draws from its bucket). */
async function tenant(t: TestApp) {
  const owner = await signUp(t);
  const created = await t
    .http()
    .post('/v1/api-keys')
    .set('Authorization', `Bearer ${owner.accessToken}`)
    .send({ name: 'rate limit test', scopes: ['admin'] });
  expect(created.status).toBe(201);
  return { ...owner, auth: `Bearer ${created.body.key as string}`, lastResponse: created };
}

describe('rate limiting: organization buckets', () => {
  let t: TestApp;
  // The buckets keep fractions of a token and refill on the app's clock: a test stops it for a
  // burst and moves it instead of sleeping, so what comes back never depends on how long the
  // requests took on a busy machine.
  const clock = new ShiftedClock();
  /** Where the test last stopped the clock (each test's mocks are restored after it). */
  let stoppedAt: number | undefined;
  const stopAt = (ms: number): number => {
    stopClockAt(clock, ms);
    stoppedAt = ms;
    return ms;
  };

  beforeAll(async () => {
    t = await createTestApp({
      // In memory, whatever the environment says: Redis's script refills on Redis's own clock.
      env: { RATE_LIMIT_ORG_RPS: '1', RATE_LIMIT_ORG_BURST: '5', REDIS_URL: undefined },
      override: (builder) => builder.overrideProvider(Clock).useValue(clock),
    });
  });
  afterEach(() => {
    jest.restoreAllMocks();
    // It runs on from where it stood, never back.
    if (stoppedAt !== undefined) clock.advance(Math.max(0, stoppedAt - clock.nowMs()));
    stoppedAt = undefined;
  });
  afterAll(() => t.close());

  it('lets exactly the burst through, then 429 until one refill interval brings one token', async () => {
    const a = await tenant(t);
    const b = await tenant(t);
    const readOnly = await t
      .http()
      .post('/v1/api-keys')
      .set('Authorization', `Bearer ${a.accessToken}`)
      .send({ name: 'reader', scopes: ['read'] });
    // Stopped just past the instant both buckets are full again: no token comes back unless the
    // test moves the clock.
    const start = stopAt(Math.max(clock.nowMs(), resetOf(readOnly), resetOf(b.lastResponse)) + 1);

    const responses: Response[] = [];
    for (let i = 0; i < 8; i++) {
      responses.push(await t.http().get(ORG_ROUTE).set('Authorization', a.auth));
    }
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect(responses.map((r) => r.headers['x-ratelimit-remaining'])).toEqual([
      '4',
      '3',
      '2',
      '1',
      '0',
      '0',
      '0',
      '0',
    ]);
    for (const response of responses) {
      expectRateLimitHeaders(response, 'org', start);
      expect(response.headers['x-ratelimit-limit']).toBe('1');
      expect(response.headers['ratelimit-policy']).toBe('"org";q=5;w=5');
    }
    for (const refused of responses.slice(5)) expectRateLimited(refused, 1);
    // Full again one refill (1 s) per token taken, from the instant the clock stands at: five
    // refills (5 s) once the last token went.
    expect(responses.map((r) => r.headers['x-ratelimit-reset'])).toEqual(
      [1, 2, 3, 4, 5, 5, 5, 5].map((s) => new Date(start + s * 1_000).toISOString()),
    );

    // The limiter runs before the scope check: this key lacks the admin scope, which would be a
    // 403, but its organization's bucket is empty (the clock stands still: no token came back).
    // With the guards the other way round, the 403 would go out, charged to the IP bucket by
    // the error path.
    const readOnlyAnswer = await t
      .http()
      .get(ORG_ROUTE)
      .set('Authorization', `Bearer ${readOnly.body.key}`);
    expectRateLimited(readOnlyAnswer, 1);
    expect(readOnlyAnswer.headers['ratelimit-policy']).toBe('"org";q=5;w=5');

    // Another organization draws from its own bucket.
    const other = await t.http().get(ORG_ROUTE).set('Authorization', b.auth);
    expect(other.status).toBe(200);
    expect(other.headers['x-ratelimit-remaining']).toBe('4');

    // One refill interval later: one token, exactly.
    stopAt(start + 1_000);
    const again = [
      await t.http().get(ORG_ROUTE).set('Authorization', a.auth),
      await t.http().get(ORG_ROUTE).set('Authorization', a.auth),
    ];
    expect(again.map((r) => r.status)).toEqual([200, 429]);
  });

  it('sizes the bucket from the organization override columns a plan sets', async () => {
    const owner = await signUp(t);
    await t.app
      .get(DataSource)
      .query('UPDATE organizations SET rate_limit_rps = 4, rate_limit_burst = 12 WHERE id = $1', [
        owner.organizationId,
      ]);
    const response = await t
      .http()
      .get('/v1/api-keys')
      .set('Authorization', `Bearer ${owner.accessToken}`);
    expect(response.status).toBe(200);
    expect(response.headers['x-ratelimit-limit']).toBe('4');
    expect(response.headers['x-ratelimit-remaining']).toBe('11');
    expect(response.headers['ratelimit-policy']).toBe('"org";q=12;w=3');
  });

  it("costs the organization nothing for a request the key's own bucket refuses (review)", async () => {
    const owner = await signUp(t);
    await t.app
      .get(DataSource)
      .query(
        'UPDATE organizations SET rate_limit_rps = 0.01, rate_limit_burst = 20 WHERE id = $1',
        [owner.organizationId],
      );
    const ownerAuth = `Bearer ${owner.accessToken}`;
    const created = await t
      .http()
      .post('/v1/api-keys')
      .set('Authorization', ownerAuth)
      .send({ name: 'partner', scopes: ['read'], rate_limit: { rps: 0.01, burst: 1 } });
    expect(created.headers['x-ratelimit-remaining']).toBe('19');
    const partner = `Bearer ${created.body.key}`;
    expect((await t.http().get('/v1/end-users').set('Authorization', partner)).status).toBe(200);
    for (let i = 0; i < 5; i++) {
      const refused = await t.http().get('/v1/end-users').set('Authorization', partner);
      expectError(refused, 429, 'rate_limited');
      expect(refused.headers['ratelimit-policy']).toBe('"key";q=1;w=100');
    }
    // The key's one request and this one: the five refused took nothing.
    const after = await t.http().get(ORG_ROUTE).set('Authorization', ownerAuth);
    expect(after.status).toBe(200);
    expect(after.headers['x-ratelimit-remaining']).toBe('17');
  });
});

describe('rate limiting: per-IP buckets for public and unauthenticated calls', () => {
  it('throttles public calls per client address, ignoring X-Forwarded-For without TRUST_PROXY', async () => {
    const t = await createTestApp({
      env: { RATE_LIMIT_IP_RPS: '0.01', RATE_LIMIT_IP_BURST: '3', TRUST_PROXY: undefined },
    });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const response = await t.http().get(PUBLIC).set('X-Forwarded-For', `198.51.100.${i}`);
        expectRateLimitHeaders(response, 'ip');
        statuses.push(response.status);
        if (response.status === 429) expectRateLimited(response, 100);
      }
      expect(statuses).toEqual([200, 200, 200, 429, 429]);
      // An unknown route is charged to the same bucket, and refused the same way.
      const unknown = await t.http().get('/v1/no-such-route');
      expectRateLimited(unknown, 100);
      expectRateLimitHeaders(unknown, 'ip');
      // So are the OpenAPI document and its UI, which Express serves beside Nest's routes.
      for (const path of ['/v1/openapi.json', '/docs/']) {
        const document = await t.http().get(path);
        expectRateLimited(document, 100);
        expectRateLimitHeaders(document, 'ip');
      }
    } finally {
      await t.close();
    }
  });

  it('believes the last X-Forwarded-For entry (the proxy hop) under TRUST_PROXY=true', async () => {
    const t = await createTestApp({
      env: { RATE_LIMIT_IP_RPS: '0.01', RATE_LIMIT_IP_BURST: '2', TRUST_PROXY: 'true' },
    });
    try {
      const from = (forwardedFor: string) =>
        t
          .http()
          .get(PUBLIC)
          .set('X-Forwarded-For', forwardedFor)
          .then((r) => r.status);
      expect([
        await from('203.0.113.1'),
        await from('203.0.113.1'),
        await from('203.0.113.1'),
      ]).toEqual([200, 200, 429]);
      // Another client behind the proxy has its own bucket…
      expect(await from('203.0.113.2')).toBe(200);
      // …and an entry the client writes in front of the proxy's does not buy a fresh one.
      expect(await from('192.0.2.77, 203.0.113.1')).toBe(429);
      expect(await from('192.0.2.78, 203.0.113.1')).toBe(429);
    } finally {
      await t.close();
    }
  });

  it('runs before authentication: bad credentials draw from the IP bucket, 401s carry headers, the flood gets 429', async () => {
    const t = await createTestApp({
      env: { RATE_LIMIT_IP_RPS: '0.01', RATE_LIMIT_IP_BURST: '2', RATE_LIMIT_ORG_BURST: '50' },
    });
    try {
      const owner = await tenant(t); // sign-up draws from the auth bucket, not this one
      const bogus = `Bearer pk_${randomUUID().replace(/-/g, '')}`;
      const first = await t.http().get(ORG_ROUTE).set('Authorization', bogus);
      expectError(first, 401, 'unauthenticated');
      expectRateLimitHeaders(first, 'ip');
      expect(first.headers['x-ratelimit-remaining']).toBe('1');
      const noCredential = await t.http().get(ORG_ROUTE);
      expectError(noCredential, 401, 'unauthenticated');
      expect(noCredential.headers['x-ratelimit-remaining']).toBe('0');
      // Refused for the flood before the credential is judged.
      expectRateLimited(await t.http().get(ORG_ROUTE).set('Authorization', bogus), 100);
      expectRateLimited(
        await t.http().get(ORG_ROUTE).set('Authorization', 'Bearer not-a-jwt'),
        100,
      );

      // A good credential from the same address draws from its organization's bucket.
      const good = await t.http().get(ORG_ROUTE).set('Authorization', owner.auth);
      expect(good.status).toBe(200);
      expectRateLimitHeaders(good, 'org');
    } finally {
      await t.close();
    }
  });

  it('gives login, forgot-password and reset-password one stricter bucket per address', async () => {
    const t = await createTestApp({
      env: {
        RATE_LIMIT_AUTH_RPS: '0.01',
        RATE_LIMIT_AUTH_BURST: '2',
        RATE_LIMIT_IP_RPS: '1',
        RATE_LIMIT_IP_BURST: '5',
      },
    });
    try {
      const login = () =>
        t
          .http()
          .post('/v1/auth/login')
          .send({ email: 'nobody@example.test', password: 'x'.repeat(12) });
      const attempts = [await login(), await login()];
      for (const attempt of attempts) {
        expect(attempt.status).not.toBe(429);
        expectRateLimitHeaders(attempt, 'auth');
        expect(attempt.headers['x-ratelimit-limit']).toBe('0.01');
      }
      expectRateLimited(await login(), 100);
      // The three routes share the bucket, whatever the spelling Express would route.
      expectRateLimited(
        await t.http().post('/v1/auth/forgot-password').send({ email: 'nobody@example.test' }),
        100,
      );
      expectRateLimited(
        await t.http().post('/V1/Auth/Reset-Password/').send({ token: 'x', new_password: 'y' }),
        100,
      );
      // So do the e-mail verification routes (contract §25), a user token's included.
      expectRateLimited(await t.http().post('/v1/auth/verify-email').send({ token: 'x' }), 100);
      expectRateLimited(
        await t
          .http()
          .post('/v1/auth/resend-verification')
          .set('Authorization', 'Bearer not.a.real.token'),
        100,
      );
      // And a login by an identity provider's token (review: it drew from the address's bucket).
      expectRateLimited(
        await t.http().post('/v1/auth/sso/login').send({ provider: 'x', id_token: 'y' }),
        100,
      );
      // The address's general bucket is untouched.
      const publicCall = await t.http().get(PUBLIC);
      expect(publicCall.status).toBe(200);
      expectRateLimitHeaders(publicCall, 'ip');
      expect(publicCall.headers['x-ratelimit-remaining']).toBe('4');
    } finally {
      await t.close();
    }
  });
});

describe('rate limiting: headers on every response', () => {
  let t: TestApp;
  beforeAll(async () => {
    // The production default sizes.
    t = await createTestApp({
      env: {
        RATE_LIMIT_ORG_RPS: undefined,
        RATE_LIMIT_ORG_BURST: undefined,
        RATE_LIMIT_IP_RPS: undefined,
        RATE_LIMIT_IP_BURST: undefined,
      },
    });
  });
  afterAll(() => t.close());

  it('on 2xx, 401, 403, 404, 400 (malformed JSON), 413 and 415, and on the OpenAPI document', async () => {
    const ok = await t.http().get(PUBLIC);
    expect(ok.status).toBe(200);
    expectRateLimitHeaders(ok, 'ip');
    expect(ok.headers['x-ratelimit-limit']).toBe('20');
    expect(ok.headers['ratelimit-policy']).toBe('"ip";q=40;w=2');
    for (const path of ['/v1/openapi.json', '/docs/', '/docs/swagger-ui.css']) {
      const served = await t.http().get(path);
      expect(served.status).toBe(200);
      expectRateLimitHeaders(served, 'ip');
    }

    const owner = await signUp(t);
    const readKey = await t
      .http()
      .post('/v1/api-keys')
      .set('Authorization', `Bearer ${owner.accessToken}`)
      .send({ name: 'reader', scopes: ['read'] });
    expectRateLimitHeaders(readKey, 'org');
    expect(readKey.headers['x-ratelimit-limit']).toBe('50');
    const forbidden = await t
      .http()
      .get(ORG_ROUTE)
      .set('Authorization', `Bearer ${readKey.body.key}`);
    expectError(forbidden, 403, 'insufficient_scope');
    expectRateLimitHeaders(forbidden, 'org');

    const cases: Array<[Response, number, string]> = [
      [await t.http().get(ORG_ROUTE), 401, 'unauthenticated'],
      [await t.http().get('/v1/no-such-route'), 404, 'not_found'],
      [
        await t
          .http()
          .post('/v1/test-nothing')
          .set('Content-Type', 'application/json')
          .send('{"a":'),
        400,
        'malformed_json',
      ],
      [
        await t
          .http()
          .post('/v1/test-nothing')
          .set('Content-Type', 'application/json')
          .send(`{"email":"${'a'.repeat(1024 * 1024 + 10)}"}`),
        413,
        'payload_too_large',
      ],
      [
        await t.http().post('/v1/test-nothing').set('Content-Type', 'text/plain').send('hi'),
        415,
        'unsupported_media_type',
      ],
    ];
    for (const [response, status, code] of cases) {
      expectError(response, status, code);
      expectRateLimitHeaders(response, 'ip');
      expect(response.headers['retry-after']).toBeUndefined();
    }
    expectRequestId(ok);
  });
});

describe('rate limiting: buckets shared through Redis', () => {
  itWithRedis(
    'two instances on one Redis let through one burst between them, not two',
    async () => {
      const env = {
        REDIS_URL: SHARED_REDIS_URL,
        // A prefix of this run's own: the machine's Redis is shared and is never flushed.
        RATE_LIMIT_REDIS_PREFIX: `e2e-rate-limit-${randomUUID()}:`,
        // A token back every 100 s of Redis's clock (which no spec moves): the ten sequential
        // requests below may take many seconds on a loaded machine and still see no refill.
        RATE_LIMIT_ORG_RPS: '0.01',
        RATE_LIMIT_ORG_BURST: '5',
        // Sharing is under test, not the fail-open: on a loaded machine a 50 ms Redis answer can
        // come late and fall back to an instance's own bucket, letting one more through.
        RATE_LIMIT_REDIS_TIMEOUT_MS: '2000',
      };
      // In memory: creating the keys costs the shared buckets nothing. Passport keeps one global
      // 'jwt' strategy (the last app's), so the access tokens are used before the others start.
      const setup = await createTestApp();
      const a = await tenant(setup);
      const b = await tenant(setup);
      const first = await createTestApp({ env });
      const second = await createTestApp({ env });
      try {
        const instances = [first, second];

        // One after the other, alternating instances.
        const sequential: number[] = [];
        for (let i = 0; i < 10; i++) {
          const response = await instances[i % 2]
            .http()
            .get(ORG_ROUTE)
            .set('Authorization', a.auth);
          expectRateLimitHeaders(response, 'org');
          sequential.push(response.status);
        }
        expect(sequential).toEqual([200, 200, 200, 200, 200, 429, 429, 429, 429, 429]);

        // All at once, half on each instance: the script is atomic, so still exactly five.
        const concurrent = await Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            instances[i % 2].http().get(ORG_ROUTE).set('Authorization', b.auth),
          ),
        );
        const statuses = concurrent.map((r) => r.status);
        expect(statuses.filter((s) => s === 200)).toHaveLength(5);
        expect(statuses.filter((s) => s === 429)).toHaveLength(7);

        const ready = await first.http().get('/health/ready');
        expect(ready.status).toBe(200);
        expect(ready.body.checks.rate_limit).toEqual({ status: 'up', store: 'redis' });
      } finally {
        await Promise.all([setup.close(), first.close(), second.close()]);
      }
    },
  );

  itWithRedis(
    "a rolled key keeps the key's bucket on every instance: one bucket in Redis for the line",
    async () => {
      const prefix = `e2e-rate-limit-${randomUUID()}:`;
      const env = {
        REDIS_URL: SHARED_REDIS_URL,
        RATE_LIMIT_REDIS_PREFIX: prefix,
        RATE_LIMIT_REDIS_TIMEOUT_MS: '2000',
      };
      // The keys are made in memory, before the instances on Redis start (see above).
      const setup = await createTestApp();
      const a = await tenant(setup);
      const created = await setup
        .http()
        .post('/v1/api-keys')
        .set('Authorization', a.auth)
        .send({ name: 'partner', scopes: ['read'], rate_limit: { rps: 0.01, burst: 2 } });
      expect(created.status).toBe(201);
      const first = await createTestApp({ env });
      const second = await createTestApp({ env });
      try {
        const get = (instance: TestApp, key: string) =>
          instance.http().get('/v1/end-users').set('Authorization', `Bearer ${key}`);
        const old = created.body.key as string;
        expect((await get(first, old)).status).toBe(200);
        expect((await get(second, old)).status).toBe(200);
        const rolled = await first
          .http()
          .post(`/v1/api-keys/${created.body.id}/roll`)
          .set('Authorization', a.auth)
          .send({ expires_in_seconds: 600 });
        expect(rolled.status).toBe(201);
        for (const instance of [first, second]) {
          for (const key of [rolled.body.key as string, old]) {
            const refused = await get(instance, key);
            expectError(refused, 429, 'rate_limited');
            expect(refused.headers['ratelimit-policy']).toBe('"key";q=2;w=200');
          }
        }
        const stored = spawnSync(
          'redis-cli',
          ['-u', SHARED_REDIS_URL, '--scan', '--pattern', `${prefix}key:*`],
          {
            encoding: 'utf8',
          },
        );
        expect(stored.stdout.trim().split('\n')).toHaveLength(1);
      } finally {
        await Promise.all([setup.close(), first.close(), second.close()]);
      }
    },
  );

  it('keeps serving when its Redis turns slow or goes away: per-instance buckets, degraded readiness', async () => {
    const redis = await startOwnRedis();
    const t = await createTestApp({
      env: {
        REDIS_URL: redis.url,
        RATE_LIMIT_REDIS_PREFIX: 'own:',
        // While Redis is healthy every count below must come from it: a busy machine's event
        // loop can stall past 100 ms, which a take would take for a slow Redis (and fall back).
        // Still well under the second a take may last while Redis is paused.
        RATE_LIMIT_REDIS_TIMEOUT_MS: '400',
        RATE_LIMIT_IP_RPS: '0.01',
        RATE_LIMIT_IP_BURST: '20',
      },
    });
    const timed = async () => {
      const started = Date.now();
      const response = await t.http().get(PUBLIC);
      return { response, ms: Date.now() - started };
    };
    try {
      // The client connects in the background; a take before it is ready falls back at once.
      const client = t.app.get<RedisClient>(REDIS_CLIENT);
      await eventually(
        () => (client?.status === 'ready' ? true : undefined),
        () => `the app's Redis connection (${client?.status})`,
      );
      // Redis holds the bucket: two tokens gone there.
      expect((await timed()).response.headers['x-ratelimit-remaining']).toBe('19');
      expect((await timed()).response.headers['x-ratelimit-remaining']).toBe('18');
      const keys = spawnSync('redis-cli', ['-u', redis.url, '--scan'], { encoding: 'utf8' });
      expect(keys.stdout.trim().split('\n')).toEqual(['own:ip:127.0.0.1']);

      // Slow: the server keeps its connection but answers nothing.
      redis.pause();
      const slow = await timed();
      expect(slow.response.status).toBe(200);
      expect(slow.ms).toBeLessThan(1_000);
      // This instance's own bucket (full until now) stood in.
      expect(slow.response.headers['x-ratelimit-remaining']).toBe('19');
      // Readiness is public too: its token also comes from the local bucket (18 left there).
      const degraded = await t.http().get('/health/ready');
      expect(degraded.status).toBe(200);
      expect(degraded.body.status).toBe('degraded');
      expect(degraded.body.checks.rate_limit).toEqual(
        expect.objectContaining({ status: 'degraded', store: 'memory' }),
      );

      // Back: the shared bucket again, once a take has found Redis answering. Readiness is
      // asked until it says so; each time draws a token (the first normally finds Redis back).
      // One that still timed out drew from the local bucket, and Redis ran its script anyway,
      // in order, after the two it had queued (the slow request's and readiness's).
      redis.resume();
      const polls: Response[] = [];
      const recovered = await eventually(
        async () => {
          const ready = await t.http().get('/health/ready');
          polls.push(ready);
          return ready.body.checks?.rate_limit?.store === 'redis' ? ready : undefined;
        },
        () => `the buckets back in Redis (last: ${JSON.stringify(polls.at(-1)?.body)})`,
      );
      expect(recovered.body.checks.rate_limit).toEqual({ status: 'up', store: 'redis' });
      expect(recovered.headers['x-ratelimit-remaining']).toBe(String(18 - 2 - polls.length));
      expect((await timed()).response.headers['x-ratelimit-remaining']).toBe(
        String(18 - 2 - polls.length - 1),
      );
      // The local bucket: 18 left after the degraded readiness, less the polls that fell back.
      const localLeft = 18 - (polls.length - 1);

      // Gone.
      await redis.kill();
      const ready = await t.http().get('/health/ready');
      expect(ready.status).toBe(200);
      expect(ready.body.status).toBe('degraded');
      expect(ready.body.checks.redis.status).toBe('down');
      expect(ready.body.checks.rate_limit.status).toBe('degraded');
      const gone: Array<{ status: number; ms: number }> = [];
      for (let i = 0; i < 19; i++) {
        const { response, ms } = await timed();
        gone.push({ status: response.status, ms });
        expectRateLimitHeaders(response, 'ip');
      }
      for (const { ms } of gone) expect(ms).toBeLessThan(1_000);
      // Still limited, by the local bucket: readiness took one of those left there (17 of 19
      // served when the first poll found Redis back).
      expect(gone.map((g) => g.status)).toEqual([
        ...Array(localLeft - 1).fill(200),
        ...Array(19 - (localLeft - 1)).fill(429),
      ]);

      // Logged, but not once per request: at most once a minute.
      const warnings = t.logs
        .entries()
        .filter((e) => String(e.msg).startsWith('rate limiter: Redis unavailable'));
      expect(warnings).toHaveLength(1);
      expect(t.logs.text()).not.toContain(redis.url);
    } finally {
      await redis.kill();
      await t.close();
    }
  });
});

describe('rate limiting: the headers of a request with an API key', () => {
  it("shows the caller's bucket, not the address's, on a request whose API key had to be looked up (review)", async () => {
    // The address's bucket tighter than the organization's: it pays for the key's lookup only.
    // The key cache's time is the app's clock, moved past it instead of slept through.
    const clock = new ShiftedClock();
    const tight = await createTestApp({
      env: {
        RATE_LIMIT_ORG_RPS: '1',
        RATE_LIMIT_ORG_BURST: '5',
        RATE_LIMIT_IP_RPS: '0.01',
        RATE_LIMIT_IP_BURST: '4',
      },
      override: (builder) => builder.overrideProvider(Clock).useValue(clock),
    });
    try {
      const { auth } = await tenant(tight);
      // Past the key cache: the next request looks the key up, drawing the address's bucket first.
      clock.advance(API_KEY_CACHE_MS);
      const looked = await tight.http().get(ORG_ROUTE).set('Authorization', auth);
      expect(looked.status).toBe(200);
      expect(looked.headers['ratelimit-policy']).toBe('"org";q=5;w=5');
      expect(looked.headers['x-ratelimit-limit']).toBe('1');
      // It did draw from the address's bucket: this public call is the second token of its four.
      const publicCall = await tight.http().get(PUBLIC);
      expect(publicCall.headers['x-ratelimit-remaining']).toBe('2');
    } finally {
      await tight.close();
    }
  });
});
