import { AppError } from '../../../common/errors/app-error';
import type { Clock } from '../../../common/time/clock';
import { inClientSpan } from '../../../tracing/spans';
import type { Admission } from './circuit-breaker';
import type { CircuitBreakers } from './circuit-breakers';
import type { EngineMetrics } from './engine-metrics';
import type { EngineRoutes, Route } from './engine-routes';
import { backoffMs, classifyFailure, type Failure } from './retry-policy';

const modelOfError = new WeakMap<object, string>();

/** Marks a failed reply's error with the model last tried, for the metrics' label. */
function withModel<E>(error: E, model: string): E {
  if (typeof error === 'object' && error !== null) modelOfError.set(error, model);
  return error;
}

/** The model a failed reply last tried (null: none, or not an engine's failure). */
export function attemptedModel(error: unknown): string | null {
  return typeof error === 'object' && error !== null ? (modelOfError.get(error) ?? null) : null;
}

export interface RouterOptions {
  engine: string;
  /** ENGINE_RETRIES: further attempts on a route after a transient failure. */
  retries: number;
  /** ENGINE_TIMEOUT_MS: the reply's whole time, from the moment it is asked for. */
  timeoutMs: number;
  random?: () => number;
  /** Waits `ms`, or rejects with the signal's reason once it is aborted. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/** What the router must know of the client's side of a reply. */
export interface ClientProgress {
  /** A piece of the reply reached the client: nothing is tried again. */
  delivered(): boolean;
  /**
   * The attempt is waiting for the client to take a piece (a stream's backpressure), not for
   * the provider: time that runs out then is the client's, not the route's.
   */
  waitingOnClient(): boolean;
}

export interface Routed<T> {
  value: T;
  route: Route;
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

const isTimeout = (signal: AbortSignal) =>
  (signal.reason as { name?: unknown } | undefined)?.name === 'TimeoutError';

/**
 * Takes a reply's attempt along the routes (§21): each route its breaker admits is tried, a
 * transient failure (429, 408, 409, 5xx, a connection refused, reset or cut off) again up to
 * `retries` times after the provider's Retry-After (at most 2 s) or a short jittered backoff,
 * then the next route; any other failure moves on at once. Once `delivered()` (a piece of the
 * reply reached the client) nothing is tried again. A wait that would outlast the reply's time
 * is not waited: the next route is tried, or the reply fails now rather than at the deadline.
 * A route's breaker hears only of the provider's failures (§29, classifyFailure): what a model
 * answers a request, and a client that is slow to read, never pause a route for others.
 * `beforeNextAttempt` runs before every attempt but the first; what it throws ends the reply
 * (the token budgets' check after a billed answer that was no reply).
 */
export class EngineRouter {
  private readonly random: () => number;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;

  constructor(
    private readonly routes: EngineRoutes,
    private readonly breakers: CircuitBreakers,
    private readonly metrics: EngineMetrics,
    private readonly clock: Clock,
    private readonly options: RouterOptions,
  ) {
    this.random = options.random ?? Math.random;
    this.sleep = options.sleep ?? abortableSleep;
  }

  async run<T>(
    personalityModel: string | null,
    signal: AbortSignal,
    client: ClientProgress,
    attempt: (route: Route, signal: AbortSignal) => Promise<T>,
    beforeNextAttempt?: () => Promise<void>,
  ): Promise<Routed<T>> {
    const deadline = this.clock.nowMs() + this.options.timeoutMs;
    const routes = this.routes.forModel(personalityModel);
    let current = routes[0];
    /** The last failed attempt, not yet counted as `retried` (it is once another follows). */
    let failed: { route: Route; failure: Failure } | undefined;
    let attempts = 0;
    try {
      for (const route of routes) {
        current = route;
        for (let retry = 0; ; retry++) {
          signal.throwIfAborted();
          // Before the breaker's admission: a refusal here must not hold a half-open probe.
          if (attempts > 0 && beforeNextAttempt) {
            // Refused here, the reply failed on the route last asked: this one was not.
            await beforeNextAttempt().catch((error: unknown) => {
              throw withModel(error, failed?.route.model ?? current.model);
            });
          }
          const admission = await this.breakers.admit(route);
          if (admission === 'skip') {
            this.metrics.count(this.options.engine, route.model, 'skipped');
            break;
          }
          if (failed) this.metrics.count(this.options.engine, failed.route.model, 'retried');
          attempts++;
          const outcome = await this.tryRoute(route, admission, retry, signal, client, attempt);
          if ('value' in outcome) return { value: outcome.value, route };
          failed = { route, failure: outcome.failure };
          if (client.delivered())
            throw new AppError('engine_unavailable', outcome.failure.description);
          if (outcome.failure.kind !== 'retry' || retry >= this.options.retries) break;
          const wait = outcome.failure.retryAfterMs ?? backoffMs(retry + 1, this.random);
          if (this.clock.nowMs() + wait >= deadline) break;
          await this.sleep(wait, signal);
        }
      }
    } catch (error) {
      throw attemptedModel(error) === null ? withModel(error, current.model) : error;
    }
    throw withModel(
      new AppError(
        'engine_unavailable',
        failed
          ? `${failed.failure.description}${attempts > 1 ? ` after ${attempts} attempts` : ''}`
          : 'The model provider is unavailable: every route is paused by its circuit breaker',
      ),
      failed?.route.model ?? current.model,
    );
  }

  private async tryRoute<T>(
    route: Route,
    admission: Admission,
    retry: number,
    signal: AbortSignal,
    client: ClientProgress,
    attempt: (route: Route, signal: AbortSignal) => Promise<T>,
  ): Promise<{ value: T } | { failure: Failure }> {
    // Whom the attempt was waiting for when its time ran out, taken as it runs out: by the time
    // the attempt's error arrives, the client may have taken the piece after all.
    let timedOutOnClient = false;
    const onAbort = () => (timedOutOnClient = client.waitingOnClient());
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const value = await inClientSpan(
        'engine attempt',
        { 'engine.route': route.label, 'engine.model': route.model, 'engine.retry': retry },
        () => attempt(route, signal),
      );
      this.breakers.succeeded(route, admission);
      return { value };
    } catch (error) {
      if (signal.aborted) {
        // Out of time with this route's answer still missing: its failure. The client leaving,
        // or holding the stream back by not reading it, says nothing about the route.
        if (isTimeout(signal) && !timedOutOnClient) await this.breakers.failed(route, admission);
        else this.breakers.released(route, admission);
        throw signal.reason;
      }
      const failure = classifyFailure(error, this.clock.nowMs());
      if (failure.countsAgainstRoute) await this.breakers.failed(route, admission);
      else this.breakers.released(route, admission);
      return { failure };
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }
}
