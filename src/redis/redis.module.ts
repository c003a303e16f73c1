import { Global, Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { type RedisConfig, redisConfig } from '../config/redis.config';

export const REDIS_CLIENT = Symbol('REDIS_CLIENT');

/** The shared Redis connection, or null when REDIS_URL is unset. */
export type RedisClient = Redis | null;

export function createRedisClient(url: string): Redis {
  return new Redis(url, {
    // Fail a command at once while disconnected instead of queueing it: callers fall back.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1_000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
    lazyConnect: false,
  });
}

@Injectable()
class RedisShutdown implements OnApplicationShutdown {
  constructor(@Inject(REDIS_CLIENT) private readonly redis: RedisClient) {}

  async onApplicationShutdown(): Promise<void> {
    if (!this.redis) return;
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}

@Global()
@Module({
  providers: [
    {
      provide: REDIS_CLIENT,
      inject: [redisConfig.KEY],
      useFactory: ({ url }: RedisConfig): RedisClient => {
        if (!url) return null;
        const client = createRedisClient(url);
        // Connection errors surface through readiness and the callers' fallbacks, not as crashes.
        client.on('error', () => undefined);
        return client;
      },
    },
    RedisShutdown,
  ],
  exports: [REDIS_CLIENT],
})
export class RedisModule {}
