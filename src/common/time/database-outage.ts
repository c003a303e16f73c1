import { isDatabaseUnavailable } from '../errors/database-unavailable';

/** While the database is out of reach, a background loop waits up to this long between runs. */
export const OUTAGE_MAX_DELAY_MS = 30_000;

/** While the database is out of reach, a background loop reports it at most this often. */
export const OUTAGE_REPORT_EVERY_MS = 60_000;

/**
 * How a background loop meets a database that is out of reach (isDatabaseUnavailable): it reports
 * the first failure, then one a minute, and waits twice as long after each run that met it, up to
 * OUTAGE_MAX_DELAY_MS (or its own interval, if longer). A 500 ms poller wrote a stack trace twice
 * a second per worker and instance while the database was away (found by review). Any other
 * failure is reported each time and changes no delay.
 */
export class DatabaseOutage {
  /** Runs in a row that met the outage. */
  private runs = 0;
  private lastReport = -Infinity;

  constructor(private readonly now: () => number = Date.now) {}

  /** A run failed with `error`: whether to report it. */
  failed(error: unknown): boolean {
    // Reported, and no change to the spacing: a failover mixes its errors.
    if (!isDatabaseUnavailable(error)) return true;
    this.runs += 1;
    const now = this.now();
    if (now - this.lastReport < OUTAGE_REPORT_EVERY_MS) return false;
    this.lastReport = now;
    return true;
  }

  /** A run went through: the loop's own interval again, and the next outage is reported. */
  succeeded(): void {
    this.runs = 0;
    this.lastReport = -Infinity;
  }

  /** The wait before the next run, for a loop whose interval is `intervalMs`. */
  delayMs(intervalMs: number): number {
    if (this.runs === 0) return intervalMs;
    return Math.min(intervalMs * 2 ** this.runs, Math.max(intervalMs, OUTAGE_MAX_DELAY_MS));
  }
}
