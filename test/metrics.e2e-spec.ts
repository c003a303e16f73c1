import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { join } from 'node:path';
import { clonePersonality, respond, uniqueUserId } from './support/data-plane';
import { MetricsService } from '../src/metrics/metrics.service';
import { ensureBuilt, runBuilt, waitUntilReady } from './support/built-app';
import { FakeStripe } from './support/fake-stripe';
import { tenantWithKey, uniqueEmail } from './support/identity';
import { answersAt, freePort } from './support/ports';
import { parseExposition, valueOf, type Exposition } from './support/prometheus';
import { createTestApp, type TestApp } from './support/test-app';

describe('Prometheus metrics (§19)', () => {
  let t: TestApp;
  let stripe: FakeStripe;
  let metricsUrl: string;

  beforeAll(async () => {
    stripe = await FakeStripe.start();
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
    t = await createTestApp({
      env: {
        METRICS_PORT: String(port),
        STRIPE_SECRET_KEY: 'sk_test_metrics',
        STRIPE_API_BASE: stripe.baseUrl,
        STRIPE_MAX_NETWORK_RETRIES: '0',
        // Erasures stay pending while this spec counts them.
        ERASURE_GRACE_SECONDS: '3600',
        ERASURE_POLL_INTERVAL_MS: '3600000',
      },
    });
  });

  afterAll(async () => {
    await t?.close();
    await stripe?.close();
  });

  async function scrape(url = metricsUrl): Promise<Exposition & { text: string }> {
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    return { ...parseExposition(text), text };
  }

  it('answers on METRICS_PORT only: the public port has no /metrics', async () => {
    const response = await t.http().get('/metrics');
    expect(response.status).toBe(404);
    expect(response.text).not.toContain('http_requests_total');
    expect((await fetch(metricsUrl.replace('/metrics', '/other'))).status).toBe(404);
  });

  it("counts a request Node's HTTP parser refused, under the method (unparsed)", async () => {
    if (!t.server.listening) {
      await new Promise<void>((resolve) => t.server.listen(0, '127.0.0.1', resolve));
    }
    const { port } = t.server.address() as AddressInfo;
    const labels = { method: '(unparsed)', route: 'unmatched', status: '400' };
    const before = valueOf(await scrape(), 'http_requests_total', labels);
    const answered = await new Promise<string>((resolve, reject) => {
      let text = '';
      const socket = connect(port, '127.0.0.1', () => socket.write('HELLO THERE\r\n\r\n'));
      socket.on('data', (chunk) => (text += chunk.toString()));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answered).toMatch(/^HTTP\/1\.1 400/);
    expect(valueOf(await scrape(), 'http_requests_total', labels)).toBe(before + 1);
  });

  it('counts requests by method, route template and status, with a duration histogram', async () => {
    const changelog = '/v1/vocabularies/emotions/changelog';
    const labels = { method: 'GET', route: changelog, status: '200' };
    const before = await scrape();
    for (let i = 0; i < 3; i++) expect((await t.http().get(changelog)).status).toBe(200);
    const after = await scrape();

    expect(after.types.get('http_requests_total')).toBe('counter');
    expect(after.types.get('http_request_duration_seconds')).toBe('histogram');
    expect(valueOf(after, 'http_requests_total', labels)).toBe(
      valueOf(before, 'http_requests_total', labels) + 3,
    );
    const count = valueOf(after, 'http_request_duration_seconds_count', labels);
    expect(count).toBe(valueOf(before, 'http_request_duration_seconds_count', labels) + 3);
    const buckets = after.samples.filter(
      (s) =>
        s.name === 'http_request_duration_seconds_bucket' &&
        s.labels.route === changelog &&
        s.labels.status === '200',
    );
    expect(buckets.length).toBeGreaterThan(5);
    expect(buckets.find((b) => b.labels.le === '+Inf')?.value).toBe(count);
    // Cumulative buckets never decrease.
    const values = buckets.map((b) => b.value);
    expect(values).toEqual([...values].sort((a, b) => a - b));
    expect(valueOf(after, 'http_request_duration_seconds_sum', labels)).toBeGreaterThan(0);
  });

  it('labels routes by template, never by raw path or id; unknown routes share one label', async () => {
    const owner = await tenantWithKey(t);
    const userId = uniqueUserId('metrics');
    expect(
      (
        await t
          .http()
          .post('/v1/end-users')
          .set('Authorization', owner.auth)
          .send({ user_id: userId })
      ).status,
    ).toBe(201);
    expect(
      (await t.http().get(`/v1/end-users/${userId}`).set('Authorization', owner.auth)).status,
    ).toBe(200);
    const missing = `nothing-here-${randomUUID()}`;
    expect((await t.http().get(`/v1/${missing}`)).status).toBe(404);

    const metrics = await scrape();
    expect(
      valueOf(metrics, 'http_requests_total', {
        method: 'GET',
        route: '/v1/end-users/:user_id',
        status: '200',
      }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      valueOf(metrics, 'http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }),
    ).toBeGreaterThanOrEqual(1);
    expect(metrics.text).not.toContain(userId);
    expect(metrics.text).not.toContain(missing);
    expect(metrics.text).not.toContain(owner.organizationId);
    // Every route label is a template the router knows, or the one fixed label.
    const routes = new Set(
      metrics.samples.filter((s) => s.labels.route !== undefined).map((s) => s.labels.route),
    );
    for (const route of routes) expect(route).toMatch(/^(unmatched|\/[a-z0-9\-/.:_]*)$/);
  });

  it('reports the database pool and the end users awaiting erasure', async () => {
    const owner = await tenantWithKey(t);
    const userId = uniqueUserId('erase');
    await t.http().post('/v1/end-users').set('Authorization', owner.auth).send({ user_id: userId });
    const before = await scrape();
    expect(
      (await t.http().delete(`/v1/end-users/${userId}`).set('Authorization', owner.auth)).status,
    ).toBe(202);
    const after = await scrape();
    expect(valueOf(after, 'erasure_pending')).toBe(valueOf(before, 'erasure_pending') + 1);

    const requests = (state: string) =>
      valueOf(after, 'db_pool_connections', { pool: 'requests', state });
    expect(requests('total')).toBeGreaterThanOrEqual(1);
    expect(requests('idle')).toBeLessThanOrEqual(requests('total'));
    expect(requests('waiting')).toBe(0);
  });

  it('counts payment provider calls by operation and outcome', async () => {
    const owner = await tenantWithKey(t, ['admin']);
    const ok = { operation: 'customers.create', outcome: 'ok' };
    const failed = { operation: 'customers.create', outcome: 'error' };
    const before = await scrape();
    expect(
      (await t.http().post('/v1/billing/payment-methods').set('Authorization', owner.auth)).status,
    ).toBe(201);
    const other = await tenantWithKey(t, ['admin']);
    stripe.fail('POST', /^\/v1\/customers$/, 500, 1);
    expect(
      (await t.http().post('/v1/billing/payment-methods').set('Authorization', other.auth)).status,
    ).toBe(502);
    const after = await scrape();
    expect(valueOf(after, 'payment_provider_requests_total', ok)).toBe(
      valueOf(before, 'payment_provider_requests_total', ok) + 1,
    );
    expect(valueOf(after, 'payment_provider_requests_total', failed)).toBe(
      valueOf(before, 'payment_provider_requests_total', failed) + 1,
    );
    expect(
      valueOf(after, 'payment_provider_requests_total', {
        operation: 'setupIntents.create',
        outcome: 'ok',
      }),
    ).toBeGreaterThanOrEqual(1);
  });

  it('counts engine requests by engine and outcome', async () => {
    const owner = await tenantWithKey(t);
    const personality = await clonePersonality(t, owner.auth);
    const labels = { engine: 'local', outcome: 'ok' };
    const before = await scrape();
    const reply = await respond(t, owner.auth, {
      personality_id: personality,
      user_id: uniqueUserId(),
      message: 'Hello there',
    });
    expect(reply.status).toBe(200);
    const after = await scrape();
    expect(valueOf(after, 'engine_requests_total', labels)).toBe(
      valueOf(before, 'engine_requests_total', labels) + 1,
    );
  });

  it("exposes Node's default process metrics and every family of §19 that has a feature yet", async () => {
    const metrics = await scrape();
    for (const name of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
    ])
      expect(metrics.types.has(name)).toBe(true);
    for (const name of [
      'rate_limit_decisions_total',
      'db_pool_connections',
      'erasure_pending',
      'webhook_deliveries_pending',
      'payment_provider_requests_total',
      'engine_requests_total',
      'engine_breaker_open',
    ])
      expect(metrics.types.has(name)).toBe(true);
  });

  it('the Grafana dashboard queries series the service exposes: RED, limiter, pool, outbox', async () => {
    const dashboard = JSON.parse(
      readFileSync(
        join(__dirname, '..', 'deploy', 'grafana', 'personality-api-dashboard.json'),
        'utf8',
      ),
    ) as { panels: Array<{ targets?: Array<{ expr: string }> }> };
    const exprs = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((t) => t.expr));
    const queried = new Set(
      exprs.flatMap((expr) => [...expr.matchAll(/([a-z_:][a-z0-9_:]*)\{/g)].map((m) => m[1])),
    );
    for (const name of [
      'http_requests_total',
      'http_request_duration_seconds_bucket',
      'rate_limit_decisions_total',
      'db_pool_connections',
      'webhook_deliveries_pending',
    ])
      expect(queried).toContain(name);
    const exposed = new Set((await scrape()).samples.map((sample) => sample.name));
    const unknown = [...queried].filter((name) => !exposed.has(name));
    expect(unknown).toEqual([]);
  });
});

describe('Metrics off (METRICS_PORT=0)', () => {
  it('starts no metrics server and records nothing per request', async () => {
    const t = await createTestApp({ env: { METRICS_PORT: '0' } });
    try {
      expect((await t.http().get('/v1/vocabularies/emotions/changelog')).status).toBe(200);
      const metrics = t.app.get(MetricsService);
      expect(metrics.enabled).toBe(false);
      const exposition = parseExposition(await metrics.registry.metrics());
      expect(exposition.samples.filter((s) => s.name === 'http_requests_total')).toEqual([]);
      expect(exposition.types.has('process_cpu_user_seconds_total')).toBe(false);
      expect(t.logs.text()).not.toContain('metrics listening');
    } finally {
      await t.close();
    }
  });
});

describe('Rate-limit decisions in the metrics', () => {
  it('counts them by bucket and outcome', async () => {
    // An app of its own whose auth bucket holds one request, so a second login is refused (the
    // other specs sign up, and sign-ups draw from the auth bucket too).
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/metrics`;
    const t = await createTestApp({
      env: { METRICS_PORT: String(port), RATE_LIMIT_AUTH_RPS: '0.01', RATE_LIMIT_AUTH_BURST: '1' },
    });
    const scrape = async () => parseExposition(await (await fetch(url)).text());
    try {
      expect((await t.http().get('/v1/vocabularies/emotions/changelog')).status).toBe(200);
      const before = await scrape();
      const login = () =>
        t
          .http()
          .post('/v1/auth/login')
          .send({ email: uniqueEmail('limited'), password: 'not the password' });
      expect((await login()).status).toBe(401);
      expect((await login()).status).toBe(429);
      const after = await scrape();
      for (const outcome of ['allowed', 'limited']) {
        const labels = { bucket: 'auth', outcome };
        expect(valueOf(after, 'rate_limit_decisions_total', labels)).toBe(
          valueOf(before, 'rate_limit_decisions_total', labels) + 1,
        );
      }
      expect(
        valueOf(after, 'rate_limit_decisions_total', { bucket: 'ip', outcome: 'allowed' }),
      ).toBeGreaterThan(0);
    } finally {
      await t.close();
    }
  });
});

/** METRICS_HOST as an operator sets it: the built service, `node dist/main.js`. */
describe('METRICS_HOST (the built service)', () => {
  beforeAll(() => ensureBuilt(), 180_000);

  it('binds the metrics port to the address named: this host only at 127.0.0.1', async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const app = runBuilt('main.js', [], {
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      METRICS_HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      RATE_LIMIT_REDIS_PREFIX: `e2e-${randomUUID()}:`,
    });
    try {
      await waitUntilReady(app, port);
      expect(await answersAt('127.0.0.1', metricsPort, '/metrics')).toBe(true);
      expect(await answersAt('127.0.0.2', metricsPort, '/metrics')).toBe(false);
      // The public port is every interface's, as before.
      expect(await answersAt('127.0.0.2', port, '/health/live')).toBe(true);
      // Log lines reach stdout within a second (pino writes them in batches), not at readiness.
      const listening = /"host":"127\.0\.0\.1".*"msg":"metrics listening"/;
      for (let waited = 0; !listening.test(app.output()) && waited < 5_000; waited += 100) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(app.output()).toMatch(listening);
    } finally {
      await app.stop();
    }
  }, 60_000);

  it('refuses to start on an address that is not one, naming the variable', async () => {
    const app = runBuilt('main.js', [], {
      PORT: String(await freePort()),
      METRICS_PORT: String(await freePort()),
      METRICS_HOST: 'localhost',
    });
    expect(await app.exited).toBe(1);
    expect(app.output()).toContain('METRICS_HOST must be an IPv4 or IPv6 address');
  }, 60_000);
});
