import { Global, Injectable, Module } from '@nestjs/common';
import { setMaxListeners } from 'node:events';
import type { ServerResponse } from 'node:http';
import { AppError } from '../errors/app-error';
import { onResponseDone } from '../http/response-done';

/**
 * The shutdown's state: begun at SIGTERM (readiness fails from then on, found by review: it
 * answered 200 while the background jobs stopped, then connections were refused); and a signal
 * aborted when a shutdown is about to give up on what is still running (main.ts, before
 * SHUTDOWN_TIMEOUT_MS forces the exit): a reply waiting on its model provider is then answered
 * 503 `service_unavailable` (Retry-After: 1) and its Idempotency-Key given up, where the forced
 * exit had cut its connection without an answer and left the key "in progress" (found by
 * review). The abort's reason is that error.
 */
/** The time left, before a shutdown forces the exit, to answer the replies it abandons. */
export const ANSWER_BEFORE_EXIT_MS = 3_000;

@Injectable()
export class ShutdownSignal {
  private readonly controller = new AbortController();
  readonly signal = this.controller.signal;
  private began = false;

  constructor() {
    // One listener per reply in flight: no leak warning for a busy instance.
    setMaxListeners(0, this.signal);
  }

  /** Whether a shutdown has begun: readiness then fails, so that no new request is sent here. */
  get stopping(): boolean {
    return this.began;
  }

  /** SIGTERM or SIGINT arrived (main.ts). */
  begin(): void {
    this.began = true;
  }

  /**
   * `signal`, also aborted (with the 503) when the shutdown abandons the work, until `response`
   * is done. A listener of its own per request, removed then, instead of AbortSignal.any with
   * this process-long signal, whose dependents piled up in some Node releases (review).
   */
  alongside(signal: AbortSignal, response: ServerResponse): AbortSignal {
    const controller = new AbortController();
    const follow = (source: AbortSignal) => () => controller.abort(source.reason);
    if (signal.aborted) controller.abort(signal.reason);
    else signal.addEventListener('abort', follow(signal), { once: true });
    const onAbandon = follow(this.signal);
    this.signal.addEventListener('abort', onAbandon, { once: true });
    onResponseDone(response, () => this.signal.removeEventListener('abort', onAbandon));
    return controller.signal;
  }

  abandon(): void {
    this.controller.abort(
      new AppError('service_unavailable', 'The service is restarting; send the request again', {
        headers: { 'Retry-After': '1' },
      }),
    );
  }
}

@Global()
@Module({ providers: [ShutdownSignal], exports: [ShutdownSignal] })
export class ShutdownSignalModule {}
