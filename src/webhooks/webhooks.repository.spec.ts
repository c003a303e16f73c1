import type { EntityManager } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import type { Database } from '../database/database';
import { WebhooksRepository } from './webhooks.repository';

describe('WebhooksRepository.insertRedelivery', () => {
  const manager = {} as EntityManager;
  const at = new Date('2026-11-29T00:00:00Z');

  /** A database whose every insert loses the attempt number to a concurrent redelivery. */
  function alwaysRacedDatabase(): { database: Database; tries: () => number } {
    let tries = 0;
    const database = {
      row: () => {
        tries += 1;
        return Promise.resolve({ endpoint_status: 'enabled' });
      },
    } as unknown as Database;
    return { database, tries: () => tries };
  }

  it('gives up with 409 conflict after a bounded number of lost races', async () => {
    const { database, tries } = alwaysRacedDatabase();
    const repository = new WebhooksRepository(database);
    const redelivery = repository.insertRedelivery(manager, 'org', 'endpoint', 'delivery', at);
    await expect(redelivery).rejects.toBeInstanceOf(AppError);
    await expect(redelivery).rejects.toMatchObject({ code: 'conflict', status: 409 });
    expect(tries()).toBe(8);
  });

  it('answers the attempt a later try inserted', async () => {
    const attempt = { endpoint_status: 'enabled', id: 'attempt', attempt: 3 };
    const rows = [{ endpoint_status: 'enabled' }, attempt];
    const database = { row: () => Promise.resolve(rows.shift()) } as unknown as Database;
    const repository = new WebhooksRepository(database);
    await expect(
      repository.insertRedelivery(manager, 'org', 'endpoint', 'delivery', at),
    ).resolves.toBe(attempt);
  });
});
