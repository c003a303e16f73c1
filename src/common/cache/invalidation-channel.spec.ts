import type Redis from 'ioredis';
import { InvalidationChannel } from './invalidation-channel';

describe('InvalidationChannel.publishConfirmed', () => {
  const logger = { warn: jest.fn() };

  it('answers within its bound when Redis takes the PUBLISH and never answers it', async () => {
    const stalled = { publish: () => new Promise<number>(() => undefined) } as unknown as Redis;
    const channel = new InvalidationChannel(stalled, 'c', logger);
    const started = performance.now();
    await channel.publishConfirmed('key');
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(400);
    expect(waited).toBeLessThan(2_000);
    expect(logger.warn).toHaveBeenCalledWith(
      { channel: 'c' },
      'cache invalidation: acknowledgements late',
    );
  });

  it('answers at once when the PUBLISH fails, and when no instance received it', async () => {
    const failing = {
      publish: () => Promise.reject(new Error('Connection is closed.')),
    } as unknown as Redis;
    const none = { publish: () => Promise.resolve(0) } as unknown as Redis;
    for (const redis of [failing, none]) {
      const started = performance.now();
      await new InvalidationChannel(redis, 'c', logger).publishConfirmed('key');
      expect(performance.now() - started).toBeLessThan(300);
    }
  });
});
