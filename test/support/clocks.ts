import { Clock } from '../../src/common/time/clock';

/**
 * The real time, moved forward by hand: for an e2e app in which the rest (JWTs, caches, the
 * delivery worker) keeps running on the real clock, where a ManualClock would stop them.
 */
export class ShiftedClock extends Clock {
  private shiftMs = 0;

  override now(): Date {
    return new Date(this.nowMs());
  }

  override nowMs(): number {
    return Date.now() + this.shiftMs;
  }

  /** Moves the app's time `ms` ahead of the real time (what a sleep of `ms` would have done). */
  advance(ms: number): void {
    this.shiftMs += ms;
  }

  /** Back to the real time. */
  reset(): void {
    this.shiftMs = 0;
  }
}

/**
 * Stops the injected `clock` (both of its readings) at `ms` until the spec's mocks are restored:
 * for a module whose Clock a spec cannot replace (`moduleAlone` builds it).
 */
export function stopClockAt(clock: Clock, ms: number): void {
  jest.spyOn(clock, 'now').mockImplementation(() => new Date(ms));
  jest.spyOn(clock, 'nowMs').mockImplementation(() => ms);
}
