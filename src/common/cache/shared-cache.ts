import type Redis from 'ioredis';
import type { Logger } from 'pino';
import type { Clock } from '../time/clock';
import { InvalidationChannel } from './invalidation-channel';
import { TtlCache } from './ttl-cache';

/**
 * This instance's copy of values kept in the database (an organization's settings, a
 * personality), dropped on every instance when one changes: the instance that changed it
 * forgets it and publishes its key (InvalidationChannel); the others forget it on the message,
 * and forget everything while their subscription has a gap. Without Redis, another instance
 * serves its copy until the TTL ends. A read that started before an invalidation is not kept:
 * it may have read the value before the change committed. Made by `Caches.shared`, which
 * starts and stops its subscription with the application.
 */
export class SharedCache<V> {
  private readonly entries: TtlCache<V>;
  private readonly changes: InvalidationChannel;

  constructor(options: {
    redis: Redis | null;
    channel: string;
    logger: Pick<Logger, 'warn'>;
    clock: Pick<Clock, 'nowMs'>;
    ttlMs: number;
    maxEntries?: number;
  }) {
    this.entries = new TtlCache<V>(options.clock, options.ttlMs, options.maxEntries);
    this.changes = new InvalidationChannel(options.redis, options.channel, options.logger);
  }

  /** For the owner's onModuleInit: starts hearing the other instances' invalidations. */
  listen(): void {
    this.changes.listen(
      (key) => this.entries.delete(key),
      () => this.entries.clear(),
    );
  }

  /** For the owner's onApplicationShutdown. */
  close(): void {
    this.changes.close();
  }

  /** The copy here, without a read. */
  peek(key: string): V | undefined {
    return this.entries.get(key);
  }

  /** The copy here, else what `read` answers (kept unless an invalidation came meanwhile). */
  async get(key: string, read: () => Promise<V>): Promise<V> {
    const cached = this.entries.get(key);
    if (cached !== undefined) return cached;
    const mark = this.entries.dropMark();
    const value = await read();
    this.entries.setUnlessDropped(mark, key, value);
    return value;
  }

  /**
   * After a change has committed: forgotten here, then on the other instances. `confirmed`
   * waits until every subscribed instance has dropped its copy (InvalidationChannel's
   * publishConfirmed), for a change the next request anywhere must see.
   */
  async invalidate(key: string, options: { confirmed?: boolean } = {}): Promise<void> {
    this.entries.delete(key);
    await (options.confirmed ? this.changes.publishConfirmed(key) : this.changes.publish(key));
  }
}
