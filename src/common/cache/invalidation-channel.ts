import { randomUUID } from 'node:crypto';
import type Redis from 'ioredis';
import type { Logger } from 'pino';

/** How long `publishConfirmed` waits for the subscribers' acknowledgements at most. */
const CONFIRM_TIMEOUT_MS = 500;

/**
 * Tells every instance to drop an entry from its in-process cache, through Redis pub/sub, so a
 * revoked API key, a password reset or a membership change takes effect at once everywhere.
 * Without Redis (or while it is unreachable) the other instances fall back on the cache's TTL, a
 * documented few seconds, unless the cache asks `isLive()` first (memberships do).
 */
export class InvalidationChannel {
  private subscriber?: Redis;
  private live = false;
  private readonly ackChannel: string;
  private readonly awaitingAcks = new Map<
    string,
    { acked: number; expected?: number; done: () => void }
  >();

  constructor(
    private readonly redis: Redis | null,
    private readonly channel: string,
    /** pino's or nestjs-pino's PinoLogger: only `warn` is used. */
    private readonly logger: Pick<Logger, 'warn'>,
  ) {
    this.ackChannel = `${channel}:ack`;
  }

  /**
   * Starts listening; does not wait for Redis, so start-up never hangs on it. `onGap` runs when
   * the subscription drops (messages may be missed until it is back): the cache should forget all.
   */
  listen(onMessage: (value: string) => void, onGap?: () => void): void {
    if (!this.redis) return;
    // A subscribed connection cannot run other commands, hence a second one. Its offline queue
    // lets the SUBSCRIBE wait for the connection; ioredis subscribes again after a reconnect.
    this.subscriber = this.redis.duplicate({ enableOfflineQueue: true });
    this.subscriber.on('error', () => undefined);
    this.subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.channel) {
        const confirmed = /^ack:([0-9a-f-]{36}) ([\s\S]*)$/.exec(message);
        onMessage(confirmed ? confirmed[2] : message);
        if (confirmed) void this.publishRaw(this.ackChannel, confirmed[1]);
      } else if (channel === this.ackChannel) {
        const waiting = this.awaitingAcks.get(message);
        if (!waiting) return;
        waiting.acked++;
        if (waiting.expected !== undefined && waiting.acked >= waiting.expected) waiting.done();
      }
    });
    this.subscriber.on('close', () => {
      this.live = false;
      onGap?.();
    });
    this.subscriber.on('ready', () => this.subscribe(onGap));
  }

  /**
   * True while this instance is subscribed: then every message published from now on reaches it.
   * Always false without Redis.
   */
  isLive(): boolean {
    return this.live;
  }

  /**
   * Resolves once Redis has taken the message (the subscribers get it at about that moment, but
   * may not have handled it yet: see publishConfirmed); never rejects.
   */
  async publish(value: string): Promise<void> {
    await this.publishRaw(this.channel, value);
  }

  /**
   * Resolves once every instance that received the message has run its handler and said so on
   * the acknowledgement channel (PUBLISH answers how many received it), or after
   * CONFIRM_TIMEOUT_MS; never rejects. Pub/sub alone only says the message is on its way: an
   * instance busy with other work could still serve one request from its cache. With the
   * acknowledgements, when the change is answered no subscribed instance holds the entry.
   */
  async publishConfirmed(value: string): Promise<void> {
    if (!this.redis) return;
    const nonce = randomUUID();
    let timer: NodeJS.Timeout | undefined;
    let settle!: () => void;
    const acknowledged = new Promise<void>((resolve) => {
      settle = resolve;
      this.awaitingAcks.set(nonce, { acked: 0, done: resolve });
      // The PUBLISH included: a Redis that takes it but never answers (a stalled server, a
      // half-open link) must not hold the change's answer past the bound (found by review).
      timer = setTimeout(() => {
        this.logger.warn({ channel: this.channel }, 'cache invalidation: acknowledgements late');
        resolve();
      }, CONFIRM_TIMEOUT_MS);
    });
    this.redis.publish(this.channel, `ack:${nonce} ${value}`).then(
      (receivers) => {
        const waiting = this.awaitingAcks.get(nonce);
        if (!waiting) return;
        // Acknowledgements may have come in before PUBLISH answered.
        waiting.expected = receivers;
        if (waiting.acked >= receivers) waiting.done();
      },
      (error: unknown) => {
        this.logger.warn(
          { err: error, channel: this.channel },
          'cache invalidation: publish failed',
        );
        settle();
      },
    );
    try {
      await acknowledged;
    } finally {
      clearTimeout(timer);
      this.awaitingAcks.delete(nonce);
    }
  }

  private async publishRaw(channel: string, message: string): Promise<void> {
    if (!this.redis) return;
    try {
      await this.redis.publish(channel, message);
    } catch (error) {
      this.logger.warn({ err: error, channel }, 'cache invalidation: publish failed');
    }
  }

  close(): void {
    this.live = false;
    this.subscriber?.disconnect();
  }

  private subscribe(onGap?: () => void): void {
    this.subscriber!.subscribe(this.channel, this.ackChannel).then(
      () => {
        // Whatever was published while unsubscribed was missed: start from an empty cache.
        onGap?.();
        this.live = true;
      },
      (error: unknown) => {
        this.logger.warn(
          { err: error, channel: this.channel },
          'cache invalidation: subscribe failed',
        );
      },
    );
  }
}
