import type { Clock } from '../time/clock';

/**
 * A small in-process cache with a time-to-live and a size bound, for hot-path lookups whose
 * staleness is bounded and documented (API keys, memberships, token versions). Made by
 * `Caches.local`; its time is the injected Clock's, so a spec moves it instead of sleeping.
 */
export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();
  /** Entries dropped on purpose so far (delete, deleteByPrefix, clear): see setUnlessDropped. */
  private drops = 0;

  constructor(
    private readonly clock: Pick<Clock, 'nowMs'>,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.clock.nowMs()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  /** `ttlMs` overrides the cache's own lifetime for this entry. */
  set(key: string, value: V, ttlMs = this.ttlMs): void {
    if (this.entries.size >= this.maxEntries) {
      // Maps iterate in insertion order: drop the oldest entry.
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(key, { value, expiresAt: this.clock.nowMs() + ttlMs });
  }

  /** What to hand setUnlessDropped, taken before the read of a value to keep. */
  dropMark(): number {
    return this.drops;
  }

  /**
   * Keeps a value read since `mark` unless an entry was dropped meanwhile: the read may have
   * seen the value before the change that dropped it committed, and keeping it would undo the
   * invalidation for the entry's whole lifetime.
   */
  setUnlessDropped(mark: number, key: string, value: V): void {
    if (this.drops === mark) this.set(key, value);
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  delete(key: string): void {
    this.drops++;
    this.entries.delete(key);
  }

  /** Drops every entry whose key starts with `prefix`. */
  deleteByPrefix(prefix: string): void {
    this.drops++;
    for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
  }

  clear(): void {
    this.drops++;
    this.entries.clear();
  }
}
