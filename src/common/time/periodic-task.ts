import { isDatabaseUnavailable } from '../errors/database-unavailable';

/** While the database is out of reach, a task waits up to this long between runs. */
export const UNAVAILABLE_MAX_DELAY_MS = 30_000;

/** While the database is out of reach, a task reports it at most this often. */
export const UNAVAILABLE_REPORT_EVERY_MS = 60_000;

export interface PeriodicTaskOptions {
  /** The pause between the end of one run and the start of the next. */
  intervalMs: number;
  /** The pause before the first run (default: `intervalMs`). */
  firstDelayMs?: number;
  run: () => Promise<void>;
  /**
   * A failed run is reported here and the schedule goes on. Runs failing because the database is
   * out of reach (isDatabaseUnavailable) are reported once, then at most once a minute, and the
   * runs wait twice as long each time, up to UNAVAILABLE_MAX_DELAY_MS (or the interval, if
   * longer): a 500 ms poller wrote a stack trace twice a second for each worker of each instance
   * while the database was away (found by review).
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
  /** Runs in a row that found the database out of reach. */
  private unavailableRuns = 0;
  private lastUnavailableReport = -Infinity;

  constructor(private readonly options: PeriodicTaskOptions) {}

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
          () => (this.unavailableRuns = 0),
          (error: unknown) => this.failed(error),
        )
        .finally(() => this.schedule(this.nextDelayMs()));
    }, delayMs);
    this.timer.unref();
  }

  private failed(error: unknown): void {
    if (!isDatabaseUnavailable(error)) {
      this.unavailableRuns = 0;
      this.options.onError(error);
      return;
    }
    this.unavailableRuns += 1;
    const now = (this.options.now ?? Date.now)();
    if (now - this.lastUnavailableReport >= UNAVAILABLE_REPORT_EVERY_MS) {
      this.lastUnavailableReport = now;
      this.options.onError(error);
    }
  }

  private nextDelayMs(): number {
    const { intervalMs } = this.options;
    if (this.unavailableRuns === 0) return intervalMs;
    const longest = Math.max(intervalMs, UNAVAILABLE_MAX_DELAY_MS);
    return Math.min(intervalMs * 2 ** this.unavailableRuns, longest);
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
