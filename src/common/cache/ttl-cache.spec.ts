import { ManualClock } from '../time/clock';
import { TtlCache } from './ttl-cache';

describe('TtlCache', () => {
  it('forgets entries after their time to live', () => {
    const clock = new ManualClock(1_000);
    const cache = new TtlCache<string>(clock, 500, 10);
    cache.set('a', 'x');
    clock.advance(499);
    expect(cache.get('a')).toBe('x');
    clock.advance(1);
    expect(cache.get('a')).toBeUndefined();
  });

  it('keeps a value read since a mark only while nothing was dropped on purpose meanwhile', () => {
    const clock = new ManualClock();
    const cache = new TtlCache<string>(clock, 500, 2);
    for (const drop of [
      () => cache.delete('other'),
      () => cache.deleteByPrefix('x'),
      () => cache.clear(),
    ]) {
      const mark = cache.dropMark();
      drop();
      cache.setUnlessDropped(mark, 'a', 'read before the change');
      expect(cache.get('a')).toBeUndefined();
    }
    // Expiry and eviction are not changes: a read across them is kept.
    cache.set('old', 'x');
    const mark = cache.dropMark();
    clock.advance(500);
    expect(cache.get('old')).toBeUndefined();
    cache.set('b', 'y');
    cache.set('c', 'z');
    cache.setUnlessDropped(mark, 'a', 'read');
    expect(cache.get('a')).toBe('read');
  });

  it('drops the oldest entry when full', () => {
    const cache = new TtlCache<number>(new ManualClock(), 10_000, 2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('c', 3);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).toEqual([undefined, 2, 3]);
  });

  it('can cache a null (a known miss) and delete by prefix', () => {
    const cache = new TtlCache<string | null>(new ManualClock(), 10_000);
    cache.set('user:1:*', null);
    cache.set('user:1:org', 'x');
    cache.set('user:2:org', 'y');
    expect(cache.get('user:1:*')).toBeNull();
    cache.deleteByPrefix('user:1:');
    expect([cache.get('user:1:*'), cache.get('user:1:org'), cache.get('user:2:org')]).toEqual([
      undefined,
      undefined,
      'y',
    ]);
  });
});
