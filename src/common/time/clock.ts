import { Global, Injectable, Module } from '@nestjs/common';

/**
 * The current time, injected wherever a rule depends on it (lockouts, expiries, grace periods),
 * so a spec moves time instead of sleeping. Production uses the system clock.
 */
@Injectable()
export class Clock {
  now(): Date {
    return new Date();
  }

  nowMs(): number {
    return Date.now();
  }
}

/** A clock a spec sets and advances by hand. */
export class ManualClock extends Clock {
  constructor(private current = Date.now()) {
    super();
  }

  override now(): Date {
    return new Date(this.current);
  }

  override nowMs(): number {
    return this.current;
  }

  advance(ms: number): void {
    this.current += ms;
  }

  set(at: Date): void {
    this.current = at.getTime();
  }
}

@Global()
@Module({ providers: [Clock], exports: [Clock] })
export class ClockModule {}
