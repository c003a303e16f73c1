import { ManualClock } from '../../../common/time/clock';
import { LocalBreaker } from './circuit-breaker';

describe('LocalBreaker', () => {
  const policy = { failures: 3, cooldownMs: 30_000, probeLeaseMs: 5_000 };
  let clock: ManualClock;
  let breaker: LocalBreaker;
  const fail = (times = 1) => {
    for (let i = 0; i < times; i++) breaker.failed(clock.nowMs(), 'pass');
  };

  beforeEach(() => {
    clock = new ManualClock(Date.parse('2031-01-01T00:00:00Z'));
    breaker = new LocalBreaker(policy);
  });

  it('opens after `failures` failed attempts in a row, not before, and a success in between starts over', () => {
    fail(2);
    expect(breaker.admit(clock.nowMs())).toBe('pass');
    breaker.succeeded();
    fail(2);
    expect(breaker.state(clock.nowMs())).toBe('closed');
    fail();
    expect(breaker.state(clock.nowMs())).toBe('open');
    expect(breaker.admit(clock.nowMs())).toBe('skip');
  });

  it('skips for the whole cool-down, then lets exactly one request probe', () => {
    fail(3);
    clock.advance(29_999);
    expect(breaker.admit(clock.nowMs())).toBe('skip');
    clock.advance(1);
    expect(breaker.state(clock.nowMs())).toBe('half-open');
    expect(breaker.admit(clock.nowMs())).toBe('probe');
    expect(breaker.admit(clock.nowMs())).toBe('skip');
    expect(breaker.admit(clock.nowMs())).toBe('skip');
  });

  it('closes when the probe succeeds', () => {
    fail(3);
    clock.advance(30_000);
    expect(breaker.admit(clock.nowMs())).toBe('probe');
    breaker.succeeded();
    expect(breaker.state(clock.nowMs())).toBe('closed');
    expect(breaker.failures).toBe(0);
    expect(breaker.admit(clock.nowMs())).toBe('pass');
    // Failures count from zero again.
    fail(2);
    expect(breaker.admit(clock.nowMs())).toBe('pass');
  });

  it('opens for another full cool-down when the probe fails', () => {
    fail(3);
    clock.advance(30_000);
    const probe = breaker.admit(clock.nowMs());
    clock.advance(1_000);
    breaker.failed(clock.nowMs(), probe);
    expect(breaker.state(clock.nowMs())).toBe('open');
    clock.advance(29_999);
    expect(breaker.admit(clock.nowMs())).toBe('skip');
    clock.advance(1);
    expect(breaker.admit(clock.nowMs())).toBe('probe');
  });

  it('lets another request probe when a probe never reports (its lease ends) or was given back', () => {
    fail(3);
    clock.advance(30_000);
    expect(breaker.admit(clock.nowMs())).toBe('probe');
    clock.advance(4_999);
    expect(breaker.admit(clock.nowMs())).toBe('skip');
    clock.advance(1);
    const second = breaker.admit(clock.nowMs());
    expect(second).toBe('probe');
    breaker.released(second);
    expect(breaker.admit(clock.nowMs())).toBe('probe');
  });

  it('opens again when a request admitted before it opened fails while it is half-open', () => {
    fail(3);
    clock.advance(30_000);
    fail();
    expect(breaker.admit(clock.nowMs())).toBe('skip');
    clock.advance(30_000);
    expect(breaker.admit(clock.nowMs())).toBe('probe');
  });

  it('keeps counting while open without moving the end of the cool-down', () => {
    fail(3);
    clock.advance(10_000);
    fail(5); // attempts admitted before it opened, failing late
    clock.advance(20_000);
    expect(breaker.admit(clock.nowMs())).toBe('probe');
  });

  it('follows the shared state: open for the time left, probing elsewhere, or closed', () => {
    const now = clock.nowMs();
    breaker.follow({ state: 'open', failures: 7, remainingMs: 1_000 }, now);
    expect(breaker.failures).toBe(7);
    expect(breaker.admit(now)).toBe('skip');
    expect(breaker.admit(now + 1_000)).toBe('probe');

    breaker.follow({ state: 'probing', failures: 7, remainingMs: 2_000 }, now);
    expect(breaker.state(now)).toBe('half-open');
    expect(breaker.admit(now + 1_999)).toBe('skip');
    expect(breaker.admit(now + 2_000)).toBe('probe');

    breaker.follow({ state: 'closed', failures: 2, remainingMs: 0 }, now);
    expect(breaker.admit(now)).toBe('pass');
    breaker.failed(now, 'pass');
    expect(breaker.state(now)).toBe('open');
  });
});
