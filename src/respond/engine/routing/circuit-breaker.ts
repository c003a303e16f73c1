/** What a breaker answers a request that would use its route. */
export type Admission = 'pass' | 'probe' | 'skip';

export type BreakerState = 'closed' | 'open' | 'half-open';

export interface BreakerPolicy {
  /** ENGINE_BREAKER_FAILURES: failed attempts in a row that open the breaker. */
  failures: number;
  /** ENGINE_BREAKER_COOLDOWN_MS: how long an open breaker skips its route. */
  cooldownMs: number;
  /**
   * How long a probe may take before another request may probe instead: a probe whose
   * outcome never arrives (its process died) must not hold the route shut for good.
   */
  probeLeaseMs: number;
}

/** What the shared breaker in Redis last said, for this instance's copy to follow. */
export interface SharedView {
  state: 'closed' | 'open' | 'probing' | 'probe';
  failures: number;
  /** 'open': until the cool-down ends; 'probing' / 'probe': until the probe's lease ends. */
  remainingMs: number;
}

/**
 * One route's circuit breaker, in this process: closed, open for the cool-down after
 * `failures` failed attempts in a row, then half-open, where one request (the probe) may try the
 * route; its success closes the breaker, its failure opens it for another cool-down. Times are
 * the injected clock's milliseconds, passed in, so a spec moves time instead of sleeping.
 */
export class LocalBreaker {
  private failureCount = 0;
  /** Set once the breaker opened; after it passes the breaker is half-open. Null: closed. */
  private openUntil: number | null = null;
  /** A probe is out until then. */
  private probeUntil = 0;

  constructor(private readonly policy: BreakerPolicy) {}

  get failures(): number {
    return this.failureCount;
  }

  state(now: number): BreakerState {
    if (this.openUntil === null) return 'closed';
    return now < this.openUntil ? 'open' : 'half-open';
  }

  /** Closed: pass. Open: skip. Half-open: the first request probes, the others skip. */
  admit(now: number): Admission {
    if (this.openUntil === null) return 'pass';
    if (now < this.openUntil || now < this.probeUntil) return 'skip';
    this.probeUntil = now + this.policy.probeLeaseMs;
    return 'probe';
  }

  /** The route answered: the failures in a row are over. */
  succeeded(): void {
    this.failureCount = 0;
    this.openUntil = null;
    this.probeUntil = 0;
  }

  /**
   * A failed attempt. The breaker opens once `failures` are in a row, and opens again when a
   * probe fails, or when any attempt fails while it is half-open (one admitted before it opened).
   */
  failed(now: number, admission: Admission): void {
    this.failureCount++;
    const halfOpen = this.openUntil !== null && now >= this.openUntil;
    const reached = this.openUntil === null && this.failureCount >= this.policy.failures;
    if (admission === 'probe' || halfOpen || reached) {
      this.openUntil = now + this.policy.cooldownMs;
      this.probeUntil = 0;
    }
  }

  /** The attempt ended saying nothing about the route (the client left): a probe may go again. */
  released(admission: Admission): void {
    if (admission === 'probe') this.probeUntil = 0;
  }

  /** Takes the shared breaker's state as this instance's own (see CircuitBreakers). */
  follow(view: SharedView, now: number): void {
    this.failureCount = view.failures;
    switch (view.state) {
      case 'closed':
        this.openUntil = null;
        this.probeUntil = 0;
        break;
      case 'open':
        this.openUntil = now + view.remainingMs;
        this.probeUntil = 0;
        break;
      case 'probing':
      case 'probe':
        this.openUntil = Math.min(this.openUntil ?? now, now);
        this.probeUntil = now + view.remainingMs;
        break;
    }
  }
}
