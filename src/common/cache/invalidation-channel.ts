import type Redis from 'ioredis';
import type { Logger } from 'pino';

/**
 * Tells every instance to drop an entry from its in-process cache, through Redis pub/sub, so a
 * revoked API key or a password reset takes effect at once everywhere. Without Redis (or while it
 * is unreachable) the other instances fall back on the cache's TTL, a documented few seconds.
 */
export class InvalidationChannel {
  private subscriber?: Redis;

  constructor(
    private readonly redis: Redis | null,
    private readonly channel: string,
    private readonly logger: Logger,
  ) {}

  /** Starts listening; does not wait for Redis, so start-up never hangs on it. */
  listen(onMessage: (value: string) => void): void {
    if (!this.redis) return;
    // A subscribed connection cannot run other commands, hence a second one. Its offline queue
    // lets the SUBSCRIBE wait for the connection; ioredis subscribes again after a reconnect.
    this.subscriber = this.redis.duplicate({ enableOfflineQueue: true });
    this.subscriber.on('error', () => undefined);
    this.subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.channel) onMessage(message);
    });
    this.subscriber.subscribe(this.channel).catch((error: unknown) => {
      this.logger.warn(
        { err: error, channel: this.channel },
        'cache invalidation: subscribe failed',
      );
    });
  }

  publish(value: string): void {
    if (!this.redis) return;
    this.redis.publish(this.channel, value).catch((error: unknown) => {
      this.logger.warn({ err: error, channel: this.channel }, 'cache invalidation: publish failed');
    });
  }

  close(): void {
    this.subscriber?.disconnect();
  }
}
