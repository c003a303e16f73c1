import { DatabaseOutage } from './database-outage';

export interface PeriodicTaskOptions {
  /** The pause between the end of one run and the start of the next. */
  intervalMs: number;
  /** The pause before the first run (default: `intervalMs`). */
  firstDelayMs?: number;
  run: () => Promise<void>;
  /**
   * A failed run is reported here and the schedule goes on; runs failing because the database is
   * out of reach are reported once a minute and spaced out (DatabaseOutage).
   */
  onError: (error: unknown) => void;
  /** Milliseconds now, for the reports' spacing (tests). */
  now?: () => number;
}

/**
 * A background job of every instance (erasure, retention purges): runs are never concurrent, the
 * timer does not keep the process alive, and `stop()` cancels the next run and waits for the
 * current one, so shutdown can close the database after it. Workers get theirs from
 * BackgroundJobs.periodic(), which starts and stops it with the application.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | undefined;
  /** The scheduled runs and exclusive() calls, one after another. */
  private chain: Promise<unknown> = Promise.resolve();
  private stopped = false;
  private readonly outage: DatabaseOutage;

  constructor(private readonly options: PeriodicTaskOptions) {
    this.outage = new DatabaseOutage(options.now);
  }

  /** True once `stop()` was called: a long run checks it between batches. */
  get isStopped(): boolean {
    return this.stopped;
  }

  start(): void {
    this.schedule(this.options.firstDelayMs ?? this.options.intervalMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.chain;
  }

  /**
   * Runs `work` after the run in progress (if any) and before the next one: never beside a run
   * of this instance. For "do it now" calls (an operator's command, a spec) on the same rows.
   */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    const result = this.chain.then(work);
    this.chain = result.catch(() => undefined);
    return result;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.exclusive(this.options.run)
        .then(
          () => this.outage.succeeded(),
          (error: unknown) => {
            if (this.outage.failed(error)) this.options.onError(error);
          },
        )
        .finally(() => this.schedule(this.outage.delayMs(this.options.intervalMs)));
    }, delayMs);
    this.timer.unref();
  }
}

/**
 * Runs a bounded batch (a DELETE … LIMIT) until one comes back short or `stop` says so; answers
 * the total. Batches keep each statement short, so purges never hold locks for long.
 */
export async function inBatches(
  batchSize: number,
  batch: () => Promise<number>,
  stop: () => boolean,
): Promise<number> {
  let total = 0;
  for (;;) {
    const done = await batch();
    total += done;
    if (done < batchSize || stop()) return total;
  }
}
