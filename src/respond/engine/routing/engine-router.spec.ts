import { PinoLogger } from 'nestjs-pino';
import { APIError } from 'openai';
import pino from 'pino';
import { AppError } from '../../../common/errors/app-error';
import { ManualClock } from '../../../common/time/clock';
import type { EngineConfig } from '../../../config/engine.config';
import type { Database } from '../../../database/database';
import { MetricsService } from '../../../metrics/metrics.service';
import { CircuitBreakers } from './circuit-breakers';
import { EngineMetrics } from './engine-metrics';
import { attemptedModel, EngineRouter } from './engine-router';
import { EngineRoutes, type Route } from './engine-routes';
import { CutOffAnswer, UnusableAnswer } from './retry-policy';

type Step = 'ok' | Error | ((signal: AbortSignal) => Promise<string>);

const httpError = (status: number, headers: Record<string, string> = {}) =>
  APIError.generate(status, {}, undefined, new Headers(headers));

function engineConfig(overrides: Partial<EngineConfig> = {}): EngineConfig {
  return {
    engine: 'openai',
    openaiBaseUrl: 'http://primary.test/v1',
    openaiApiKey: 'sk-primary',
    openaiModel: 'main',
    fallbacks: [
      { model: 'backup', baseUrl: 'http://backup.test/v1', apiKey: 'sk-backup' },
      { model: 'main', baseUrl: 'http://primary.test/v1', apiKey: 'sk-primary' },
    ],
    timeoutMs: 10_000,
    historyMessages: 20,
    retries: 1,
    breakerFailures: 3,
    breakerCooldownMs: 30_000,
    maxTokens: 1024,
    ...overrides,
  };
}

/** The router with a manual clock, breakers without Redis, and providers that follow a script. */
function setup(overrides: Partial<EngineConfig> = {}) {
  const engine = engineConfig(overrides);
  const clock = new ManualClock(Date.parse('2031-01-01T00:00:00Z'));
  const logger = new PinoLogger({ pinoHttp: pino({ level: 'silent' }) });
  const metricsService = new MetricsService(
    { metricsPort: 0, metricsHost: undefined, tracing: false },
    { pool: {} } as Database,
    logger,
    'server',
  );
  const metrics = new EngineMetrics(metricsService);
  const breakers = new CircuitBreakers(engine, clock, logger, null, metricsService);
  const routes = new EngineRoutes(engine);
  const waits: number[] = [];
  const router = new EngineRouter(routes, breakers, metrics, clock, {
    engine: 'openai',
    retries: engine.retries,
    timeoutMs: engine.timeoutMs,
    random: () => 0,
    sleep: (ms) => {
      waits.push(ms);
      clock.advance(ms);
      return Promise.resolve();
    },
  });
  const scripts = new Map<string, Step[]>();
  const calls: string[] = [];
  const script = (model: string, ...steps: Step[]) => scripts.set(model, steps);
  const attempt = async (route: Route, signal: AbortSignal) => {
    calls.push(route.model);
    const step = scripts.get(route.model)?.shift() ?? 'ok';
    if (step === 'ok') return `reply of ${route.model}`;
    if (typeof step === 'function') return step(signal);
    throw step;
  };
  const run = (
    options: {
      model?: string | null;
      signal?: AbortSignal;
      delivered?: () => boolean;
      waitingOnClient?: () => boolean;
      beforeNextAttempt?: () => Promise<void>;
    } = {},
  ) =>
    router.run(
      options.model ?? null,
      options.signal ?? new AbortController().signal,
      {
        delivered: options.delivered ?? (() => false),
        waitingOnClient: options.waitingOnClient ?? (() => false),
      },
      attempt,
      options.beforeNextAttempt,
    );
  const counts = async () => {
    const metric = await metricsService.registry.getSingleMetric('engine_requests_total')!.get();
    return Object.fromEntries(
      metric.values
        .filter(({ value }) => value > 0)
        .map(({ labels, value }) => [`${labels.model} ${labels.outcome}`, value]),
    );
  };
  const gauge = async () => {
    const metric = await metricsService.registry.getSingleMetric('engine_breaker_open')!.get();
    return Object.fromEntries(metric.values.map(({ labels, value }) => [labels.route, value]));
  };
  return { clock, routes, breakers, router, script, calls, waits, run, counts, gauge };
}

describe('EngineRouter', () => {
  it('makes one SDK client per distinct base URL and key, and tries a repeated route once', async () => {
    const t = setup();
    expect(t.routes.clientCount).toBe(2);
    expect(t.routes.forModel(null).map((route) => route.label)).toEqual([
      'main@http://primary.test/v1',
      'backup@http://backup.test/v1',
    ]);
    expect(t.routes.forModel('special').map((route) => route.model)).toEqual([
      'special',
      'backup',
      'main',
    ]);
    t.script('special', httpError(404));
    t.script('backup', httpError(404));
    await expect(t.run({ model: 'special' })).resolves.toMatchObject({ value: 'reply of main' });
    expect(t.calls).toEqual(['special', 'backup', 'main']);
  });

  it('retries a 500 once after a short backoff, then takes the next route', async () => {
    const t = setup();
    t.script('main', httpError(500), httpError(503));
    const routed = await t.run();
    expect(routed.value).toBe('reply of backup');
    expect(routed.route.label).toBe('backup@http://backup.test/v1');
    expect(t.calls).toEqual(['main', 'main', 'backup']);
    expect(t.waits).toEqual([250]);
    expect(await t.counts()).toEqual({ 'main retried': 2 });
  });

  it('waits what a 429 asks, an hour cut to 2 s', async () => {
    const t = setup();
    t.script('main', httpError(429, { 'retry-after': '3600' }));
    expect((await t.run()).value).toBe('reply of main');
    expect(t.waits).toEqual([2_000]);
  });

  it('does not retry a 4xx other than 408/409/429, and a 400 does not count against the route', async () => {
    const t = setup();
    t.script('main', httpError(404));
    expect((await t.run()).value).toBe('reply of backup');
    expect(t.calls).toEqual(['main', 'backup']);
    expect(t.waits).toEqual([]);
    for (let i = 0; i < 5; i++) {
      t.script('main', httpError(400));
      await t.run();
    }
    expect(t.breakers.state(t.routes.forModel(null)[0])).toBe('closed');
  });

  it('does not wait past the reply’s deadline: the next route at once, or a 502 now', async () => {
    const t = setup({ timeoutMs: 1_500 });
    t.script('main', httpError(429, { 'retry-after': '2' }));
    expect((await t.run()).value).toBe('reply of backup');
    expect(t.waits).toEqual([]);

    const alone = setup({ timeoutMs: 1_500, fallbacks: [] });
    alone.script('main', httpError(503, { 'retry-after-ms': '1600' }));
    await expect(alone.run()).rejects.toMatchObject({
      code: 'engine_unavailable',
      message: 'The model provider failed (HTTP 503)',
    });
    expect(alone.calls).toEqual(['main']);
  });

  it('tries nothing again once a piece of the reply reached the client', async () => {
    const t = setup();
    t.script('main', new TypeError('terminated'));
    const failure = t.run({ delivered: () => true });
    await expect(failure).rejects.toBeInstanceOf(AppError);
    await expect(failure).rejects.toMatchObject({ code: 'engine_unavailable' });
    expect(t.calls).toEqual(['main']);
    expect(attemptedModel(await failure.catch((error: unknown) => error))).toBe('main');
  });

  it('moves on at once from an answer that is no reply, and retries one that was cut off', async () => {
    const t = setup();
    t.script('main', new UnusableAnswer('garbage'));
    expect((await t.run()).value).toBe('reply of backup');
    expect(t.calls).toEqual(['main', 'backup']);
    t.calls.length = 0;
    t.script('main', new CutOffAnswer());
    expect((await t.run()).value).toBe('reply of main');
    expect(t.calls).toEqual(['main', 'main']);
  });

  it('asks beforeNextAttempt before every attempt but the first; what it throws ends the reply', async () => {
    const t = setup();
    const asked: string[] = [];
    const before = () => {
      asked.push(`before attempt ${t.calls.length + 1}`);
      return Promise.resolve();
    };
    t.script('main', new UnusableAnswer('refused'));
    expect((await t.run({ beforeNextAttempt: before })).value).toBe('reply of backup');
    expect(asked).toEqual(['before attempt 2']);
    t.calls.length = 0;
    t.script('main', new UnusableAnswer('refused'));
    const refusal = new AppError('budget_exceeded', 'no room');
    await expect(t.run({ beforeNextAttempt: () => Promise.reject(refusal) })).rejects.toBe(refusal);
    // The next route was never asked, nor admitted by its breaker: the reply failed on main.
    expect(t.calls).toEqual(['main']);
    expect(attemptedModel(refusal)).toBe('main');
    expect(await t.counts()).not.toHaveProperty('backup skipped');
  });

  it('answers 502 naming the last failure when every route failed', async () => {
    const t = setup({ breakerFailures: 100 });
    t.script('main', httpError(500), httpError(500));
    t.script('backup', httpError(502), httpError(502));
    const failure = await t.run().catch((error: unknown) => error);
    expect(failure).toMatchObject({
      code: 'engine_unavailable',
      status: 502,
      message: 'The model provider failed (HTTP 502) after 4 attempts',
    });
    expect(attemptedModel(failure)).toBe('backup');
    expect(await t.counts()).toEqual({ 'main retried': 2, 'backup retried': 1 });
  });

  it('skips a route whose breaker opened, without a call, until the cool-down ends; then one probe', async () => {
    const t = setup({ retries: 0 });
    const main = t.routes.forModel(null)[0];
    t.script('main', httpError(500), httpError(500), httpError(500));
    for (let i = 0; i < 3; i++) expect((await t.run()).value).toBe('reply of backup');
    expect(t.breakers.state(main)).toBe('open');
    expect((await t.gauge())['main@http://primary.test/v1']).toBe(1);
    t.calls.length = 0;
    for (let i = 0; i < 10; i++) await t.run();
    expect(t.calls).toEqual(Array(10).fill('backup'));
    expect((await t.counts())['main skipped']).toBe(10);

    t.clock.advance(30_000);
    t.calls.length = 0;
    // The probe fails: another full cool-down.
    t.script('main', httpError(500));
    await t.run();
    await t.run();
    expect(t.calls).toEqual(['main', 'backup', 'backup']);
    t.clock.advance(30_000);
    t.calls.length = 0;
    await t.run();
    await t.run();
    expect(t.calls).toEqual(['main', 'main']);
    expect(t.breakers.state(main)).toBe('closed');
    expect((await t.gauge())['main@http://primary.test/v1']).toBe(0);
  });

  it('counts each failed attempt toward the breaker, retries included', async () => {
    const t = setup({ retries: 2, breakerFailures: 3, fallbacks: [] });
    t.script('main', httpError(500), httpError(500), httpError(500));
    await expect(t.run()).rejects.toMatchObject({ code: 'engine_unavailable' });
    expect(t.calls).toEqual(['main', 'main', 'main']);
    expect(t.breakers.state(t.routes.forModel(null)[0])).toBe('open');
    await expect(t.run()).rejects.toMatchObject({
      message: 'The model provider is unavailable: every route is paused by its circuit breaker',
    });
    expect(t.calls).toHaveLength(3);
  });

  it('counts a timeout against the route, and a client that left not at all', async () => {
    const t = setup({ retries: 0, breakerFailures: 1, fallbacks: [] });
    const main = t.routes.forModel(null)[0];
    let started = () => undefined as void;
    const hang = (signal: AbortSignal) =>
      new Promise<string>((_, reject) => {
        signal.addEventListener('abort', () => reject(new Error('aborted')));
        started();
      });
    const attemptStarted = () => new Promise<void>((resolve) => (started = resolve));
    const left = new AbortController();
    t.script('main', hang);
    let running = attemptStarted();
    const cancelled = t.run({ signal: left.signal });
    await running;
    left.abort(new Error('the client closed the connection'));
    await expect(cancelled).rejects.toThrow('the client closed the connection');
    expect(t.breakers.state(main)).toBe('closed');

    const timedOut = new AbortController();
    t.script('main', hang);
    running = attemptStarted();
    const late = t.run({ signal: timedOut.signal });
    await running;
    timedOut.abort(new DOMException('timed out', 'TimeoutError'));
    const error = await late.catch((reason: unknown) => reason);
    expect(error).toMatchObject({ name: 'TimeoutError' });
    expect(attemptedModel(error)).toBe('main');
    expect(t.breakers.state(main)).toBe('open');
  });

  // §29: nothing a tenant's messages can make a model say pauses a route for other tenants.
  it('never opens a breaker for answers that hold no reply, however many arrive at once', async () => {
    const t = setup({ breakerFailures: 3 });
    const [main, backup] = t.routes.forModel(null);
    const refused = () => new UnusableAnswer('The model provider answered with no reply');
    t.script('main', ...Array.from({ length: 20 }, refused));
    t.script('backup', ...Array.from({ length: 20 }, refused));
    const runs = await Promise.allSettled(Array.from({ length: 20 }, () => t.run()));
    expect(runs.every((run) => run.status === 'rejected')).toBe(true);
    expect(t.calls.filter((model) => model === 'main')).toHaveLength(20);
    expect(t.breakers.state(main)).toBe('closed');
    expect(t.breakers.state(backup)).toBe('closed');
    expect(await t.gauge()).toEqual({
      'main@http://primary.test/v1': 0,
      'backup@http://backup.test/v1': 0,
    });
    expect((await t.run()).value).toBe('reply of main');
  });

  it('neither counts nor forgets the failures in a row for an answer with no reply', async () => {
    const t = setup({ retries: 0, breakerFailures: 3 });
    const main = t.routes.forModel(null)[0];
    t.script(
      'main',
      httpError(500),
      httpError(500),
      new UnusableAnswer('empty'),
      new SyntaxError('Unexpected token <'),
      httpError(503),
    );
    for (let i = 0; i < 5; i++) await t.run();
    // The third failure of the provider opens it; what the model said in between is no news.
    expect(t.breakers.state(main)).toBe('open');
  });

  it('frees a half-open route’s probe when its answer holds no reply: the next request probes', async () => {
    const t = setup({ retries: 0, breakerFailures: 1 });
    const main = t.routes.forModel(null)[0];
    t.script('main', httpError(500));
    await t.run();
    expect(t.breakers.state(main)).toBe('open');
    t.clock.advance(30_000);
    t.calls.length = 0;
    t.script('main', new UnusableAnswer('refused'));
    expect((await t.run()).value).toBe('reply of backup');
    expect((await t.run()).value).toBe('reply of main');
    expect(t.calls).toEqual(['main', 'backup', 'main']);
    expect(t.breakers.state(main)).toBe('closed');
  });

  it('does not count a timeout that came while the attempt waited for the client to read', async () => {
    const t = setup({ retries: 0, breakerFailures: 1, fallbacks: [] });
    const main = t.routes.forModel(null)[0];
    let started = () => undefined as void;
    const attemptStarted = () => new Promise<void>((resolve) => (started = resolve));
    let waitingOnClient = false;
    // A stream whose client stopped reading: the attempt waits on the client's socket, not on
    // the provider, when the reply's time runs out.
    t.script('main', (signal) => {
      waitingOnClient = true;
      started();
      return new Promise<string>((_, reject) =>
        signal.addEventListener('abort', () => {
          waitingOnClient = false;
          reject(new Error('aborted'));
        }),
      );
    });
    const timedOut = new AbortController();
    const running = attemptStarted();
    const late = t.run({
      signal: timedOut.signal,
      delivered: () => true,
      waitingOnClient: () => waitingOnClient,
    });
    await running;
    timedOut.abort(new DOMException('timed out', 'TimeoutError'));
    await expect(late).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(t.breakers.state(main)).toBe('closed');
  });
});
