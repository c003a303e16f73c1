import { ManualClock } from '../time/clock';
import { SharedCache } from './shared-cache';

const logger = { warn: () => undefined };

describe('SharedCache (without Redis)', () => {
  it('reads once, then answers its copy until the key is invalidated', async () => {
    const cache = new SharedCache<{ n: number }>({
      redis: null,
      channel: 'c',
      logger,
      clock: new ManualClock(),
      ttlMs: 60_000,
    });
    let reads = 0;
    const read = async () => ({ n: ++reads });
    expect(await cache.get('a', read)).toEqual({ n: 1 });
    expect(await cache.get('a', read)).toEqual({ n: 1 });
    expect(cache.peek('a')).toEqual({ n: 1 });
    await cache.invalidate('a');
    expect(cache.peek('a')).toBeUndefined();
    expect(await cache.get('a', read)).toEqual({ n: 2 });
  });

  it('does not keep a read that an invalidation overtook', async () => {
    const cache = new SharedCache<string>({
      redis: null,
      channel: 'c',
      logger,
      clock: new ManualClock(),
      ttlMs: 60_000,
    });
    let finish!: (value: string) => void;
    const reading = cache.get('a', () => new Promise<string>((resolve) => (finish = resolve)));
    await cache.invalidate('a');
    finish('old');
    expect(await reading).toBe('old');
    expect(cache.peek('a')).toBeUndefined();
  });

  it('keeps nothing when the read fails', async () => {
    const cache = new SharedCache<string>({
      redis: null,
      channel: 'c',
      logger,
      clock: new ManualClock(),
      ttlMs: 60_000,
    });
    await expect(cache.get('a', () => Promise.reject(new Error('gone')))).rejects.toThrow('gone');
    expect(cache.peek('a')).toBeUndefined();
  });
});
