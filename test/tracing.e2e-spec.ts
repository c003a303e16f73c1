import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { ensureBuilt, runBuilt, waitUntilReady, type BuiltProcess } from './support/built-app';
import { FakeStripe } from './support/fake-stripe';
import { OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver';
import { freePort } from './support/ports';
import { eventually } from './support/wait';

const SERVER = 2;
const CLIENT = 3;

/**
 * Tracing patches modules as they load, which Jest's module registry gets in the way of: these
 * specs run the built service (`node dist/main.js`) as a child process, as production does.
 */
describe('Tracing (OpenTelemetry, the built service)', () => {
  let receiver: OtlpReceiver;
  let stripe: FakeStripe;
  let app: BuiltProcess;
  let base: string;
  /** Checked against the log once the process has exited. */
  let respondRequest: { requestId: string; traceId: string } | undefined;

  beforeAll(async () => {
    ensureBuilt();
    receiver = await OtlpReceiver.start();
    stripe = await FakeStripe.start();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    app = runBuilt('main.js', [], {
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      // The standard variable: export every 100 ms instead of every 5 s.
      OTEL_BSP_SCHEDULE_DELAY: '100',
      STRIPE_SECRET_KEY: 'sk_test_tracing',
      STRIPE_API_BASE: stripe.baseUrl,
      RATE_LIMIT_REDIS_PREFIX: `e2e-${randomUUID()}:`,
      // Behind a load balancer, as in production: X-Forwarded-For's last entry is the client.
      TRUST_PROXY: 'true',
    });
    await waitUntilReady(app, port);
  }, 180_000);

  afterAll(async () => {
    await app?.stop();
    await receiver?.close();
    await stripe?.close();
  });

  async function call(
    method: string,
    path: string,
    options: { auth?: string; body?: unknown; traceparent?: string } = {},
  ) {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(options.auth ? { authorization: options.auth } : {}),
        ...(options.traceparent ? { traceparent: options.traceparent } : {}),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    const text = await response.text();
    return {
      status: response.status,
      requestId: response.headers.get('x-request-id') ?? '',
      body: (text ? JSON.parse(text) : null) as Record<string, unknown>,
    };
  }

  async function tenant(scopes: string[]) {
    const signup = await call('POST', '/v1/auth/signup', {
      body: { email: `trace-${randomUUID()}@example.test`, password: `pw ${randomUUID()}` },
    });
    expect(signup.status).toBe(201);
    const key = await call('POST', '/v1/api-keys', {
      auth: `Bearer ${signup.body.access_token as string}`,
      body: { name: 'tracing', scopes },
    });
    expect(key.status).toBe(201);
    return `Bearer ${key.body.key as string}`;
  }

  function incomingTrace() {
    const traceId = randomBytes(16).toString('hex');
    const parentId = randomBytes(8).toString('hex');
    return { traceId, parentId, traceparent: `00-${traceId}-${parentId}-01` };
  }

  const spansOf = (traceId: string) => receiver.spans.filter((span) => span.traceId === traceId);
  const describeSpans = (traceId: string) => () =>
    `spans of ${traceId}: ${JSON.stringify(spansOf(traceId).map((s) => [s.name, s.kind]))}`;

  it('continues an incoming traceparent: server, PostgreSQL and engine spans in the same trace', async () => {
    const auth = await tenant(['read_write']);
    const personality = await call('POST', '/v1/personalities/from-catalog', {
      auth,
      body: { slug: 'sage-mentor' },
    });
    expect(personality.status).toBe(201);

    const { traceId, parentId, traceparent } = incomingTrace();
    const reply = await call('POST', '/v1/respond', {
      auth,
      traceparent,
      body: { personality_id: personality.body.id, user_id: `eu-${randomUUID()}`, message: 'hi' },
    });
    expect(reply.status).toBe(200);

    const has = (match: (span: ReceivedSpan) => boolean) =>
      eventually(() => spansOf(traceId).find(match), describeSpans(traceId));
    const server = await has((span) => span.kind === SERVER);
    expect(server.parentSpanId).toBe(parentId);
    expect(server.name).toBe('POST /v1/respond');
    expect(server.attributes['http.route']).toBe('/v1/respond');
    expect(server.serviceName).toBe('personality-api');
    const query = await has(
      (span) =>
        span.kind === CLIENT &&
        (span.attributes['db.system'] ?? span.attributes['db.system.name']) === 'postgresql',
    );
    expect(query.spanId).not.toBe(server.spanId);
    const engine = await has((span) => span.name === 'engine local reply');
    expect(engine.kind).toBe(CLIENT);
    expect(engine.attributes['engine.name']).toBe('local');
    if (process.env.REDIS_URL) {
      // The rate limiter's bucket update, when buckets live in Redis: the command's name only,
      // not its keys (a client address, a digest of a user_id; found by review).
      const redis = await has(
        (span) =>
          span.attributes['db.system'] === 'redis' || span.attributes['db.system.name'] === 'redis',
      );
      const statement = redis.attributes['db.query.text'] ?? redis.attributes['db.statement'];
      expect(statement).toMatch(/^[a-z]+$/);
    }

    respondRequest = { requestId: reply.requestId, traceId };
  });

  it('names no raw path parameter nor query in a server span: an erased user_id stays out of traces (§25)', async () => {
    const auth = await tenant(['read_write']);
    const userId = `someone-${randomUUID()}@example.test`;
    expect((await call('POST', '/v1/end-users', { auth, body: { user_id: userId } })).status).toBe(
      201,
    );
    const { traceId, traceparent } = incomingTrace();
    const got = await call(
      'GET',
      `/v1/end-users/${encodeURIComponent(userId)}?starting_after=${encodeURIComponent(userId)}`,
      { auth, traceparent },
    );
    expect(got.status).toBe(200);
    const server = await eventually(
      () => spansOf(traceId).find((span) => span.kind === SERVER),
      describeSpans(traceId),
    );
    expect(server.name).toBe('GET /v1/end-users/:user_id');
    const text = JSON.stringify(spansOf(traceId));
    expect(text).not.toContain(userId);
    expect(text).not.toContain(encodeURIComponent(userId));
    expect(text).not.toContain('someone-');
  });

  it('traces calls to the payment provider inside the request that made them', async () => {
    const auth = await tenant(['admin']);
    const { traceId, traceparent } = incomingTrace();
    const intent = await call('POST', '/v1/billing/payment-methods', { auth, traceparent });
    expect(intent.status).toBe(201);

    const customers = await eventually(
      () => spansOf(traceId).find((span) => span.name === 'stripe customers.create'),
      describeSpans(traceId),
    );
    expect(customers.kind).toBe(CLIENT);
    expect(customers.attributes['payment.operation']).toBe('customers.create');
    // The SDK's HTTP request to the provider is a child of that span, which names its origin
    // only: an outgoing URL's path and query may be a receiver's credentials (a webhook's).
    const request = await eventually(
      () =>
        spansOf(traceId).find(
          (span) => span.parentSpanId === customers.spanId && span.kind === CLIENT,
        ),
      describeSpans(traceId),
    );
    expect(request.attributes['url.full']).toBe(new URL(stripe.baseUrl).origin);
    expect(JSON.stringify(spansOf(traceId))).not.toContain('/v1/customers');
  });

  it("writes a quiet instance's log line within seconds, not once 4 KiB of others follow (review)", async () => {
    const response = await fetch(`${base}/v1/vocabularies/emotions`);
    const requestId = response.headers.get('x-request-id') ?? 'none';
    await eventually(
      () => (app.output().includes(requestId) ? true : undefined),
      `the access line of ${requestId} on stdout`,
      5_000,
    );
  });

  it("keeps at most 256 characters of a caller's User-Agent and Host in a span", async () => {
    const { traceId, traceparent } = incomingTrace();
    const response = await fetch(`${base}/v1/vocabularies/emotions`, {
      headers: { traceparent, 'user-agent': `agent-${'u'.repeat(5_000)}` },
    });
    expect(response.status).toBe(200);
    const server = await eventually(
      () => spansOf(traceId).find((span) => span.kind === SERVER),
      describeSpans(traceId),
    );
    expect(server.attributes['user_agent.original']).toBe(`agent-${'u'.repeat(250)}`);
    expect(server.attributes['server.address']).toBe('127.0.0.1');
  });

  it('keeps as client.address the X-Forwarded-For entry the service believes, if an IP address (review)', async () => {
    const addressOf = async (forwardedFor: string) => {
      const { traceId, traceparent } = incomingTrace();
      const response = await fetch(`${base}/v1/vocabularies/emotions`, {
        headers: { traceparent, 'x-forwarded-for': forwardedFor },
      });
      expect(response.status).toBe(200);
      const server = await eventually(
        () => spansOf(traceId).find((span) => span.kind === SERVER),
        describeSpans(traceId),
      );
      return server.attributes['client.address'];
    };
    // TRUST_PROXY: the last entry, which the load balancer appended, as request.ip reads it.
    expect(await addressOf('198.51.100.1, 203.0.113.7')).toBe('203.0.113.7');
    // Anything else written there is not kept: the connection's peer is.
    const peer = /^(::ffff:)?127\.0\.0\.1$/;
    expect(await addressOf(`203.0.113.7, someone@example.com ${'x'.repeat(5_000)}`)).toMatch(peer);
    expect(await addressOf(`fe80::1%${'x'.repeat(5_000)}`)).toMatch(peer);
  });

  it('does not trace probes; exits 0 on SIGTERM after exporting what it holds; log lines carry trace_id', async () => {
    const before = receiver.spans.length;
    const { traceId, traceparent } = incomingTrace();
    expect((await call('GET', '/health/live', { traceparent })).status).toBe(200);
    const { traceId: lastTrace, traceparent: last } = incomingTrace();
    expect(
      (await call('GET', '/v1/vocabularies/emotions/changelog', { traceparent: last })).status,
    ).toBe(200);
    expect(await app.stop()).toBe(0);
    // Exported at shutdown at the latest.
    expect(spansOf(lastTrace).some((span) => span.kind === SERVER)).toBe(true);
    expect(spansOf(traceId)).toEqual([]);
    expect(receiver.spans.length).toBeGreaterThan(before);
    expect(receiver.contentTypes).toEqual(new Set(['application/x-protobuf']));

    const lines = app
      .output()
      .split('\n')
      .filter((text) => text.startsWith('{'))
      .map((text) => JSON.parse(text) as Record<string, unknown>);
    const access = lines.find(
      (line) => line.requestId === respondRequest?.requestId && line.msg === 'request completed',
    );
    expect(access?.trace_id).toBe(respondRequest?.traceId);
    expect(access?.span_id).toEqual(expect.stringMatching(/^[0-9a-f]{16}$/));
    // Lines outside any request have none.
    expect(lines.find((line) => line.msg === 'stopped')).not.toHaveProperty('trace_id');
  });
});

describe('Tracing with a collector that never answers', () => {
  it.each([
    ['the default SHUTDOWN_TIMEOUT_MS', {}],
    // Less time than SPAN_EXPORT_AT_EXIT_MS: the export gets what is left (review of the change).
    ['a SHUTDOWN_TIMEOUT_MS of 1 s', { SHUTDOWN_TIMEOUT_MS: '1000' }],
  ])(
    'exits 0 on SIGTERM within %s, not at its end with 1 (review)',
    async (_name, shutdown) => {
      ensureBuilt();
      // Takes connections, reads, never answers.
      const silent = createServer(() => undefined);
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      const port = await freePort();
      const app = runBuilt('main.js', [], {
        PORT: String(port),
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
        RATE_LIMIT_REDIS_PREFIX: `e2e-${randomUUID()}:`,
        ...shutdown,
      });
      try {
        await waitUntilReady(app, port);
        const answer = await fetch(`http://127.0.0.1:${port}/v1/vocabularies/emotions/changelog`);
        expect(answer.status).toBe(200);
        const started = Date.now();
        expect(await app.stop()).toBe(0);
        // Before: the exporter's own 10 s, as long as the default SHUTDOWN_TIMEOUT_MS, which ended
        // it with exit 1 ("shutdown timed out").
        expect(Date.now() - started).toBeLessThan(8_000);
        const lines = app
          .output()
          .split('\n')
          .filter((text) => text.startsWith('{'))
          .map((text) => JSON.parse(text) as Record<string, unknown>);
        expect(lines).toContainEqual(
          expect.objectContaining({ level: 'warn', msg: 'span export failed' }),
        );
        expect(lines.some((line) => line.msg === 'shutdown timed out')).toBe(false);
      } finally {
        await app.stop();
        silent.closeAllConnections();
        silent.close();
      }
    },
    180_000,
  );
});

describe('Tracing off', () => {
  it('does not even load the OpenTelemetry SDK without OTEL_EXPORTER_OTLP_ENDPOINT', () => {
    ensureBuilt();
    const probe = (env: Record<string, string>) =>
      execFileSync(
        process.execPath,
        [
          '-e',
          `const started = require(${JSON.stringify(join(__dirname, '..', 'dist', 'tracing', 'tracing.js'))}).startTracing();
           const loaded = Object.keys(require.cache).some((file) => file.includes('@opentelemetry/sdk-node'));
           process.stdout.write(JSON.stringify({ started, loaded }));
           process.exit(0);`,
        ],
        { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8' },
      );
    expect(JSON.parse(probe({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }))).toEqual({
      started: false,
      loaded: false,
    });
    expect(JSON.parse(probe({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }))).toEqual({
      started: true,
      loaded: true,
    });
  }, 180_000);
});
