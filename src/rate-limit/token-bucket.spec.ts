import { isAuthRateLimited } from './auth-routes';
import { MemoryBuckets } from './memory-buckets';
import {
  BUCKET_KEPT_MS,
  type BucketPolicy,
  policyOf,
  rateLimitHeaders,
  takeToken,
  throttlerLimits,
} from './token-bucket';

const POLICY: BucketPolicy = { name: 'org', rps: 2, burst: 5 };
const T0 = Date.parse('2026-11-22T03:00:00.000Z');

/** A MemoryBuckets on a clock the test moves by hand. */
function bucketsAt(start = T0) {
  const clock = { now: start };
  const buckets = new MemoryBuckets(() => clock.now);
  return { clock, buckets };
}

describe('token bucket arithmetic', () => {
  it('starts full and lets exactly `burst` requests through at one instant', () => {
    const { buckets } = bucketsAt();
    const outcomes = Array.from({ length: 7 }, () => buckets.take('k', POLICY).allowed);
    expect(outcomes).toEqual([true, true, true, true, true, false, false]);
  });

  it('reports the whole tokens left, never negative, never rising without time passing', () => {
    const { buckets } = bucketsAt();
    const remaining = Array.from({ length: 8 }, () => {
      const decision = buckets.take('k', POLICY);
      return Number(rateLimitHeaders(decision, POLICY, T0)['X-RateLimit-Remaining']);
    });
    expect(remaining).toEqual([4, 3, 2, 1, 0, 0, 0, 0]);
  });

  it('refills `rps` tokens per second, including fractions', () => {
    const { clock, buckets } = bucketsAt();
    for (let i = 0; i < 5; i++) buckets.take('k', POLICY);
    expect(buckets.take('k', POLICY).allowed).toBe(false);

    clock.now += 250; // half a token
    expect(buckets.take('k', POLICY).allowed).toBe(false);
    clock.now += 250; // one token in all
    const decision = buckets.take('k', POLICY);
    expect(decision.allowed).toBe(true);
    expect(decision.tokens).toBeCloseTo(0, 10);
    expect(buckets.take('k', POLICY).allowed).toBe(false);
  });

  it('never holds more than `burst` tokens however long it rests', () => {
    const { clock, buckets } = bucketsAt();
    buckets.take('k', POLICY);
    clock.now += 60 * 60 * 1000;
    expect(buckets.take('k', POLICY).tokens).toBe(POLICY.burst - 1);
  });

  it('does not refill when the clock steps back', () => {
    const { clock, buckets } = bucketsAt();
    for (let i = 0; i < 5; i++) buckets.take('k', POLICY);
    clock.now -= 10_000;
    expect(buckets.take('k', POLICY).allowed).toBe(false);
    clock.now += 10_000 + 500;
    expect(buckets.take('k', POLICY).allowed).toBe(true);
  });

  it('applies a lowered burst at once', () => {
    const { state } = takeToken(undefined, { ...POLICY, burst: 100 }, T0);
    const { decision } = takeToken(state, POLICY, T0);
    expect(decision.tokens).toBe(POLICY.burst - 1);
  });

  it('keeps buckets apart by key', () => {
    const { buckets } = bucketsAt();
    for (let i = 0; i < 5; i++) buckets.take('a', POLICY);
    expect(buckets.take('a', POLICY).allowed).toBe(false);
    expect(buckets.take('b', POLICY).allowed).toBe(true);
  });

  it('times the reset at the moment the bucket is full again', () => {
    const { buckets } = bucketsAt();
    buckets.take('k', POLICY);
    const decision = buckets.take('k', POLICY); // 3 tokens left: 2 missing at 2/s = 1 s
    expect(decision.msUntilFull).toBe(1000);
    const headers = rateLimitHeaders(decision, POLICY, T0);
    expect(headers['X-RateLimit-Reset']).toBe('2026-11-22T03:00:01.000Z');
    expect(headers.RateLimit).toBe('"org";r=3;t=1');
  });

  it('points Retry-After at the moment one token is back, in whole seconds rounded up', () => {
    const slow: BucketPolicy = { name: 'auth', rps: 0.2, burst: 2 };
    const { clock, buckets } = bucketsAt();
    buckets.take('k', slow);
    buckets.take('k', slow);
    let refused = buckets.take('k', slow);
    expect(refused.msUntilToken).toBe(5000);
    expect(rateLimitHeaders(refused, slow, clock.now)['Retry-After']).toBe('5');

    clock.now += 1200; // 3.8 s to go: rounded up, never early
    refused = buckets.take('k', slow);
    expect(refused.msUntilToken).toBe(3800);
    expect(rateLimitHeaders(refused, slow, clock.now)['Retry-After']).toBe('4');
    clock.now += 3799;
    expect(buckets.take('k', slow).allowed).toBe(false);
    clock.now += 1;
    expect(buckets.take('k', slow).allowed).toBe(true);
  });

  it('sends no Retry-After on an allowed request, and at least 1 s on a refused one', () => {
    const fast: BucketPolicy = { name: 'ip', rps: 1000, burst: 1 };
    const { clock, buckets } = bucketsAt();
    expect(rateLimitHeaders(buckets.take('k', fast), fast, clock.now)['Retry-After']).toBe(
      undefined,
    );
    const refused = buckets.take('k', fast);
    expect(refused.msUntilToken).toBe(1);
    expect(rateLimitHeaders(refused, fast, clock.now)['Retry-After']).toBe('1');
  });

  it('writes its headers for the slowest bucket a client may set (any rps > 0)', () => {
    const slowest: BucketPolicy = { name: 'end_user', rps: 1e-13, burst: 1 };
    const { state, decision } = takeToken(undefined, slowest, T0);
    const refused = takeToken(state, slowest, T0).decision;
    // Unused for an hour, it is full again (BUCKET_KEPT_MS): what its headers say.
    expect([decision.msUntilFull, refused.msUntilToken]).toEqual([BUCKET_KEPT_MS, BUCKET_KEPT_MS]);
    const headers = rateLimitHeaders(refused, slowest, T0);
    expect(headers['X-RateLimit-Reset']).toBe(new Date(T0 + BUCKET_KEPT_MS).toISOString());
    expect(headers['Retry-After']).toBe('3600');
    expect(headers['RateLimit-Policy']).toBe('"end_user";q=1;w=3600');
    expect(headers.RateLimit).toBe('"end_user";r=0;t=3600');
    // The smallest rps of all still sizes a throttler, and comes back as an rps > 0.
    const { limit, ttl } = throttlerLimits({ rps: 5e-324, burst: 1 });
    expect(Number.isFinite(ttl)).toBe(true);
    expect(policyOf('end_user', limit, ttl).rps).toBeGreaterThan(0);
  });

  it('writes the contract headers and the IETF draft ones', () => {
    const policy: BucketPolicy = { name: 'ip', rps: 0.5, burst: 3 };
    const { decision } = takeToken(undefined, policy, T0);
    expect(rateLimitHeaders(decision, policy, T0)).toEqual({
      'X-RateLimit-Limit': '0.5',
      'X-RateLimit-Remaining': '2',
      'X-RateLimit-Reset': '2026-11-22T03:00:02.000Z',
      'RateLimit-Policy': '"ip";q=3;w=6',
      RateLimit: '"ip";r=2;t=2',
    });
  });
});

describe('MemoryBuckets', () => {
  it('forgets buckets once they have refilled, which loses nothing', () => {
    const clock = { now: T0 };
    const buckets = new MemoryBuckets(() => clock.now, 1_000, 3);
    buckets.take('a', POLICY);
    buckets.take('b', POLICY);
    clock.now += 1000; // a and b are full again
    buckets.take('c', POLICY); // third take: sweep
    expect(buckets.size).toBe(1);
    for (let i = 0; i < 5; i++) expect(buckets.take('a', POLICY).allowed).toBe(true);
  });

  it('keeps a slow bucket an hour unused at most: then it is full, and swept', () => {
    const clock = { now: T0 };
    const buckets = new MemoryBuckets(() => clock.now, 1_000, 1);
    // One token a day: empty after one request, refilled only after a day.
    const slow = { name: 'end_user', rps: 1 / 86_400, burst: 1 };
    expect(buckets.take('slow', slow).allowed).toBe(true);
    clock.now += BUCKET_KEPT_MS - 1;
    expect(buckets.take('slow', slow).allowed).toBe(false);
    clock.now += BUCKET_KEPT_MS + 1; // past an hour since the last take
    buckets.take('other', POLICY); // every take sweeps here
    expect(buckets.size).toBe(1);
    expect(buckets.take('slow', slow).allowed).toBe(true);
  });

  it('stays within its size bound by dropping the least recently used bucket', () => {
    const buckets = new MemoryBuckets(() => T0, 2);
    buckets.take('a', POLICY);
    buckets.take('b', POLICY);
    buckets.take('a', POLICY);
    buckets.take('c', POLICY); // drops b, used least recently
    expect(buckets.size).toBe(2);
    expect(buckets.take('a', POLICY).tokens).toBe(2);
    expect(buckets.take('b', POLICY).tokens).toBe(4);
  });
});

describe('isAuthRateLimited', () => {
  it('matches the four routes (sign-up included, contract §14) the way Express routes them', () => {
    expect(isAuthRateLimited('POST', '/v1/auth/login')).toBe(true);
    expect(isAuthRateLimited('post', '/V1/Auth/Forgot-Password/')).toBe(true);
    expect(isAuthRateLimited('POST', '/v1/auth/reset-password//')).toBe(true);
    expect(isAuthRateLimited('GET', '/v1/auth/login')).toBe(false);
    expect(isAuthRateLimited('POST', '/v1/auth/signup')).toBe(true);
    expect(isAuthRateLimited('GET', '/v1/auth/signup')).toBe(false);
    expect(isAuthRateLimited('POST', '/v1/auth/login/extra')).toBe(false);
    // Contract §25: the verification routes too (a mail per request; tokens to guess).
    expect(isAuthRateLimited('POST', '/v1/auth/resend-verification')).toBe(true);
    expect(isAuthRateLimited('POST', '/v1/auth/verify-email')).toBe(true);
    // A login by an identity provider's token is a login (review).
    expect(isAuthRateLimited('POST', '/v1/auth/sso/login')).toBe(true);
  });
});
