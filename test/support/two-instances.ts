import Redis from 'ioredis';
import { type OwnRedis, startOwnRedis } from './redis-server';
import { createTestApp, type TestApp } from './test-app';
import { UNTHROTTLED } from './unthrottled';
import { eventually } from './wait';

export interface TwoInstances {
  redis: OwnRedis;
  a: TestApp;
  b: TestApp;
  /** Both apps, then Redis. */
  close(): Promise<void>;
}

/**
 * Two instances sharing one database and a Redis of their own, as in production behind a
 * balancer: one JWT_SECRET, rate limits out of the way, plus `env`. Answers once both instances
 * are subscribed to each of `channels`, so a change published on one reaches the other.
 */
export async function startTwoInstances(
  options: { env?: Record<string, string>; channels?: string[] } = {},
): Promise<TwoInstances> {
  const redis = await startOwnRedis();
  const env = {
    ...UNTHROTTLED,
    REDIS_URL: redis.url,
    JWT_SECRET: 'shared-secret-of-both-instances-0123456789abcdef',
    ...options.env,
  };
  const started: TestApp[] = [];
  const close = async () => {
    for (const app of started) await app.close();
    await redis.kill();
  };
  try {
    started.push(await createTestApp({ env }));
    started.push(await createTestApp({ env }));
    const channels = options.channels ?? [];
    if (channels.length > 0) await bothSubscribed(redis.url, channels);
  } catch (error) {
    await close();
    throw error;
  }
  return { redis, a: started[0], b: started[1], close };
}

async function bothSubscribed(url: string, channels: string[]): Promise<void> {
  const probe = new Redis(url);
  try {
    await eventually(
      async () => {
        // NUMSUB answers [channel, count, channel, count, …].
        const counts = (await probe.pubsub('NUMSUB', ...channels)) as Array<string | number>;
        return counts.filter((_, i) => i % 2 === 1).every((n) => Number(n) >= 2) ? true : undefined;
      },
      `two subscribers on each of ${channels.join(', ')}`,
    );
  } finally {
    probe.disconnect();
  }
}
