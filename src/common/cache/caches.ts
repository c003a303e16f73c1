import {
  Global,
  Inject,
  Injectable,
  Module,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { REDIS_CLIENT, type RedisClient } from '../../redis/redis.module';
import { Clock } from '../time/clock';
import { SharedCache } from './shared-cache';
import { TtlCache } from './ttl-cache';

/**
 * Makes the in-process caches of the feature services, on the injected Clock: `local` for a copy
 * only this instance drops, `shared` for one every instance drops when it changes (through
 * Redis). The shared ones start hearing the other instances when the modules initialise and stop
 * when they are destroyed, so their owners carry no lifecycle of their own.
 */
@Injectable()
export class Caches implements OnModuleInit, OnApplicationShutdown {
  private readonly sharedCaches: SharedCache<unknown>[] = [];
  private listening = false;

  constructor(
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
  ) {
    this.logger.setContext(SharedCache.name);
  }

  local<V>(ttlMs: number, maxEntries?: number): TtlCache<V> {
    return new TtlCache<V>(this.clock, ttlMs, maxEntries);
  }

  /** `channel` names the Redis channel of its invalidations: one per kind of value. */
  shared<V>(options: { channel: string; ttlMs: number; maxEntries?: number }): SharedCache<V> {
    const cache = new SharedCache<V>({
      ...options,
      redis: this.redis,
      logger: this.logger,
      clock: this.clock,
    });
    this.sharedCaches.push(cache);
    if (this.listening) cache.listen();
    return cache;
  }

  onModuleInit(): void {
    this.listening = true;
    for (const cache of this.sharedCaches) cache.listen();
  }

  /** Once the HTTP server has closed: a request still served hears every invalidation. */
  onApplicationShutdown(): void {
    for (const cache of this.sharedCaches) cache.close();
  }
}

@Global()
@Module({ providers: [Caches], exports: [Caches] })
export class CachesModule {}
