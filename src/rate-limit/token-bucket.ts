import type { ThrottlerStorage } from '@nestjs/throttler';

/** The framework's storage record (its type is not exported by name). */
type ThrottlerStorageRecord = Awaited<ReturnType<ThrottlerStorage['increment']>>;

/** A bucket's size: it refills `rps` tokens per second up to `burst` tokens. */
export interface BucketPolicy {
  /** Names the policy in the IETF `RateLimit-Policy` header: the throttler, org, ip or auth. */
  name: string;
  rps: number;
  burst: number;
}

/**
 * A bucket as the throttler framework sizes one: `limit` requests per `ttl` milliseconds, read
 * as `limit` tokens (the burst) refilled in full over `ttl` (so `rps` = limit / ttl).
 */
export function throttlerLimits(policy: Pick<BucketPolicy, 'rps' | 'burst'>): {
  limit: number;
  ttl: number;
} {
  // Finite even for the smallest rps (5e-324), so that policyOf gives an rps > 0 back.
  return {
    limit: policy.burst,
    ttl: Math.min((policy.burst * 1000) / policy.rps, Number.MAX_VALUE),
  };
}

/** The policy a throttler's `limit` and `ttl` describe (the inverse of throttlerLimits). */
export function policyOf(name: string, limit: number, ttl: number): BucketPolicy {
  // limit / (limit / rps) comes back as rps in binary floating point within one ulp; twelve
  // significant digits give the configured decimal back, for the X-RateLimit-Limit header.
  return { name, burst: limit, rps: Number(((limit * 1000) / ttl).toPrecision(12)) };
}

/** What a bucket holds between requests: a (fractional) token count as of `updatedAt` (ms). */
export interface BucketState {
  tokens: number;
  updatedAt: number;
}

/** The outcome of taking one token, with everything the response headers need. */
export interface BucketDecision {
  allowed: boolean;
  /** Tokens left after this request, fractional; headers report the whole part. */
  tokens: number;
  /** Milliseconds until the bucket is full again. */
  msUntilFull: number;
  /** Milliseconds until one whole token is back (0 when one is there now). */
  msUntilToken: number;
}

/** What the storage answers the throttler: its record, plus the exact timings for the headers. */
export interface TokenBucketRecord extends ThrottlerStorageRecord, BucketDecision {}

/** The framework's record of a decision: hits used of `limit`, and times in whole seconds. */
export function toThrottlerRecord(decision: BucketDecision, limit: number): TokenBucketRecord {
  // Spelled out rather than spread: one object of one shape, on every request.
  return {
    allowed: decision.allowed,
    tokens: decision.tokens,
    msUntilFull: decision.msUntilFull,
    msUntilToken: decision.msUntilToken,
    totalHits: limit - Math.floor(decision.tokens),
    timeToExpire: Math.ceil(decision.msUntilFull / 1000),
    isBlocked: !decision.allowed,
    timeToBlockExpire: decision.allowed ? 0 : Math.max(1, Math.ceil(decision.msUntilToken / 1000)),
  };
}

/**
 * Takes one token from a bucket at time `now` (ms). A missing bucket is a full one, which is also
 * why stores may forget a bucket once it would have refilled: nothing is lost. A clock that steps
 * back does not refill (nor drain) the bucket. Pure, so the Redis script can mirror it line by line.
 */
export function takeToken(
  state: BucketState | undefined,
  policy: Pick<BucketPolicy, 'rps' | 'burst'>,
  now: number,
): { state: BucketState; decision: BucketDecision } {
  const perMs = policy.rps / 1000;
  let tokens = policy.burst;
  let updatedAt = now;
  if (state) {
    const elapsed = Math.max(0, now - state.updatedAt);
    // min() also applies a lowered burst at once (a plan changed downwards).
    tokens = Math.min(policy.burst, state.tokens + elapsed * perMs);
    updatedAt = Math.max(now, state.updatedAt);
  }
  const allowed = tokens >= 1;
  if (allowed) tokens -= 1;
  return { state: { tokens, updatedAt }, decision: decide(allowed, tokens, policy) };
}

/**
 * How long a bucket is kept unused at most, in Redis as in memory, and so the longest wait a
 * decision reports: one refilled over more than this (a client may set any rps > 0, contract
 * §23) is full after an hour without a request, which its headers say. Any bucket is exact while
 * used at least once an hour; the store holds one key per bucket used in the last hour, whatever
 * the rates (kept until full, a bucket refilled over years, on a new user_id per reply, kept a
 * key per user_id for decades: found by review). Bounded, the wait also stays a date JavaScript
 * can write (at rps 1e-13 X-RateLimit-Reset threw: found by an earlier review).
 */
export const BUCKET_KEPT_MS = 3_600_000;

/** The timings of a decision, from the tokens left after it. */
export function decide(
  allowed: boolean,
  tokens: number,
  policy: Pick<BucketPolicy, 'rps' | 'burst'>,
): BucketDecision {
  const perMs = policy.rps / 1000;
  return {
    allowed,
    tokens,
    msUntilFull: Math.min(BUCKET_KEPT_MS, Math.ceil((policy.burst - tokens) / perMs)),
    msUntilToken: tokens >= 1 ? 0 : Math.min(BUCKET_KEPT_MS, Math.ceil((1 - tokens) / perMs)),
  };
}

/**
 * The response headers for a decision: the contract's X-RateLimit-* (§5) and the IETF draft's
 * `RateLimit-Policy` / `RateLimit` (draft-ietf-httpapi-ratelimit-headers: quota `q` = burst,
 * window `w` = seconds to refill it, remaining `r`, seconds to reset `t`, which need no clock
 * agreement with the client). A refused request adds `Retry-After`.
 */
export function rateLimitHeaders(
  decision: BucketDecision,
  policy: BucketPolicy,
  now: number,
): Record<string, string> {
  const remaining = Math.max(0, Math.floor(decision.tokens));
  // A slower bucket is full again after an hour unused (BUCKET_KEPT_MS): its window is the hour.
  const windowSeconds = Math.min(Math.ceil(policy.burst / policy.rps), BUCKET_KEPT_MS / 1000);
  const headers: Record<string, string> = {
    'X-RateLimit-Limit': String(policy.rps),
    'X-RateLimit-Remaining': String(remaining),
    'X-RateLimit-Reset': new Date(now + decision.msUntilFull).toISOString(),
    'RateLimit-Policy': `"${policy.name}";q=${policy.burst};w=${windowSeconds}`,
    RateLimit: `"${policy.name}";r=${remaining};t=${Math.ceil(decision.msUntilFull / 1000)}`,
  };
  if (!decision.allowed) {
    headers['Retry-After'] = String(Math.max(1, Math.ceil(decision.msUntilToken / 1000)));
  }
  return headers;
}
