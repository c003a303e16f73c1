import type { PinoLogger } from 'nestjs-pino';
import { ManualClock } from '../common/time/clock';
import type { RateLimitConfig } from '../config/rate-limit.config';
import { SpendReservations } from './spend-reservations';

function reservations(clock = new ManualClock(0)) {
  const config = { redisTimeoutMs: 50, redisPrefix: 'test:' } as RateLimitConfig;
  const logger = { setContext: () => undefined, warn: () => undefined } as unknown as PinoLogger;
  return { store: new SpendReservations(null, clock, logger, config), clock };
}

describe('SpendReservations without Redis (one instance)', () => {
  const month = (used: number) => [{ key: '{org}:month:2026-11', limit: 1000, used }];

  it('admits while spent + reserved is below the limit, and counts what it refuses', async () => {
    const { store } = reservations();
    await expect(store.reserve('a', 600, 60_000, month(0))).resolves.toEqual({
      admitted: true,
      store: 'memory',
    });
    await expect(store.reserve('b', 600, 60_000, month(300))).resolves.toEqual({
      admitted: true,
      store: 'memory',
    });
    // 300 spent + 1200 reserved: refused, and the refusal says how much is counted.
    await expect(store.reserve('c', 1, 60_000, month(300))).resolves.toEqual({
      admitted: false,
      scope: 0,
      counted: 1500,
    });
    await store.release('a', 600, 'memory', ['{org}:month:2026-11']);
    await store.release('b', 600, 'memory', ['{org}:month:2026-11']);
    await expect(store.reserve('c', 1, 60_000, month(999))).resolves.toMatchObject({
      admitted: true,
    });
  });

  it('checks every scope and reserves in none when one refuses', async () => {
    const { store } = reservations();
    const scopes = [
      { key: 'm', limit: 1000, used: 0 },
      { key: 'd', limit: 100, used: 100 },
    ];
    await expect(store.reserve('a', 50, 60_000, scopes)).resolves.toEqual({
      admitted: false,
      scope: 1,
      counted: 100,
    });
    await expect(
      store.reserve('b', 999, 60_000, [{ key: 'm', limit: 1000, used: 0 }]),
    ).resolves.toMatchObject({ admitted: true });
  });

  it('lets a reservation that was never released lapse at its expiry', async () => {
    const { store, clock } = reservations();
    await store.reserve('crashed', 1000, 5_000, month(0));
    await expect(store.reserve('x', 1, 5_000, month(0))).resolves.toMatchObject({
      admitted: false,
    });
    clock.advance(5_000);
    await expect(store.reserve('x', 1, 5_000, month(0))).resolves.toMatchObject({
      admitted: true,
    });
  });
});
