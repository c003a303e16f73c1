import type { PinoLogger } from 'nestjs-pino';
import { Clock } from '../common/time/clock';
import type { IdempotencyRepository } from './idempotency.repository';
import { IDEMPOTENCY_LEASE_MS, IdempotencyService } from './idempotency.service';

describe('IdempotencyService: the lease of a running claim', () => {
  const logger = { setContext: jest.fn(), warn: jest.fn() } as unknown as PinoLogger;
  const ref = { scopeType: 'organization' as const, scopeId: 'org', key: 'k' };

  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  function serviceWith(renew: jest.Mock) {
    const keys = {
      insert: jest.fn().mockResolvedValue(true),
      renew,
    } as unknown as IdempotencyRepository;
    return new IdempotencyService(keys, new Clock(), logger);
  }

  it('is renewed every third of it while the request runs', async () => {
    const renew = jest.fn().mockResolvedValue(true);
    const service = serviceWith(renew);
    await service.begin(ref, 'request', Buffer.alloc(32), []);
    jest.advanceTimersByTime(IDEMPOTENCY_LEASE_MS);
    expect(renew).toHaveBeenCalledTimes(3);
  });

  it('is no longer renewed once the instance shuts down', async () => {
    const renew = jest.fn().mockResolvedValue(true);
    const service = serviceWith(renew);
    await service.begin(ref, 'request', Buffer.alloc(32), []);
    service.onApplicationShutdown();
    // Before, a claim its request never settled went on renewing on ended pools, every
    // ten seconds, for as long as the process lived.
    jest.advanceTimersByTime(3 * IDEMPOTENCY_LEASE_MS);
    expect(renew).not.toHaveBeenCalled();
  });
});
