import {
  type BucketDecision,
  type BucketPolicy,
  type BucketState,
  takeToken,
} from './token-bucket';

interface Entry extends BucketState {
  /**
   * When the bucket will be full again, or BUCKET_KEPT_MS from its last take if sooner: from then
   * on it equals a missing one.
   */
  fullAt: number;
}

/**
 * Buckets in process memory: the store without REDIS_URL, and the fallback while Redis is away.
 * Memory stays bounded: buckets that have refilled are swept (forgetting them loses nothing), and
 * past `maxEntries` the least recently used one is dropped (which hands that client a full
 * bucket, the price of not letting a flood of addresses exhaust memory).
 */
export class MemoryBuckets {
  private readonly entries = new Map<string, Entry>();
  private takesSinceSweep = 0;

  constructor(
    private readonly now: () => number = Date.now,
    private readonly maxEntries = 100_000,
    private readonly sweepEvery = 10_000,
  ) {}

  take(key: string, policy: Pick<BucketPolicy, 'rps' | 'burst'>): BucketDecision {
    const now = this.now();
    // Past fullAt the bucket is full, or was kept unused for BUCKET_KEPT_MS: as a missing one.
    // At fullAt itself it is kept, as Redis keeps a key until its expiry has passed.
    const entry = this.entries.get(key);
    const { state, decision } = takeToken(
      entry !== undefined && entry.fullAt >= now ? entry : undefined,
      policy,
      now,
    );
    // Delete then set: Map order becomes least-recently-used first.
    this.entries.delete(key);
    this.entries.set(key, {
      tokens: state.tokens,
      updatedAt: state.updatedAt,
      // decide() caps the wait at BUCKET_KEPT_MS.
      fullAt: now + decision.msUntilFull,
    });
    if (++this.takesSinceSweep >= this.sweepEvery) this.sweep(now);
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    return decision;
  }

  get size(): number {
    return this.entries.size;
  }

  private sweep(now: number): void {
    this.takesSinceSweep = 0;
    for (const [key, entry] of this.entries) if (entry.fullAt < now) this.entries.delete(key);
  }
}
