import { DataSource } from 'typeorm';
import { randomUUID } from 'node:crypto';
import { IdempotencyRepository } from '../../src/idempotency/idempotency.repository';
import { tenantWithKey } from '../support/identity';
import { createTestApp, type TestApp } from '../support/test-app';

/**
 * IdempotencyRepository on a real database: the claims and answers of concurrent requests share
 * statements (Batcher), so a batch can hold one key twice, keys in any order, and answers of
 * claims that no longer hold their key.
 */
describe('IdempotencyRepository (database)', () => {
  let t: TestApp;
  let keys: IdempotencyRepository;
  let organizationId: string;
  const hash = Buffer.alloc(32, 7);
  const leaseMs = 30_000;

  beforeAll(async () => {
    t = await createTestApp();
    keys = t.app.get(IdempotencyRepository);
    organizationId = (await tenantWithKey(t, ['read_write'])).organizationId;
  });

  afterAll(() => t.close());

  const claimOf = (key: string, requestId = randomUUID()) => ({
    scopeType: 'organization' as const,
    scopeId: organizationId,
    key,
    requestId,
  });
  const stored = (key: string) =>
    t.app
      .get(DataSource)
      .query<Array<{ response_status: number | null; locked_by: string | null }>>(
        `SELECT response_status, locked_by FROM idempotency_keys
        WHERE scope_type = 'organization' AND scope_id = $1 AND key = $2`,
        [organizationId, key],
      );

  it('claims each key once when claims of the same keys arrive together, in any order', async () => {
    const names = Array.from({ length: 6 }, (_, i) => `batch-${i}-${randomUUID()}`);
    // 30 claims at once: the first goes alone, the rest share the next statements.
    const claims = Array.from({ length: 30 }, (_, i) => claimOf(names[(i * 7) % names.length]));
    const won = await Promise.all(claims.map((c) => keys.insert(c, hash, leaseMs, new Date())));
    for (const name of names) {
      const winners = claims.filter((c, i) => c.key === name && won[i]);
      expect(winners).toHaveLength(1);
      expect(await stored(name)).toEqual([
        { response_status: null, locked_by: winners[0].requestId },
      ]);
    }
  });

  it('stores the answers of claims that hold their key, and not of those that do not', async () => {
    const held = Array.from({ length: 10 }, () => claimOf(`answer-${randomUUID()}`));
    for (const c of held) expect(await keys.insert(c, hash, leaseMs, new Date())).toBe(true);
    const strangers = held.slice(0, 3).map((c) => claimOf(c.key));
    const results = await Promise.all(
      [...held, ...strangers].map((c, i) =>
        keys.complete(
          c,
          { status: 201, body: JSON.stringify({ i }), subject: i % 2 ? null : hash },
          new Date(),
        ),
      ),
    );
    expect(results).toEqual([...held.map(() => true), ...strangers.map(() => false)]);
    for (const c of held)
      expect(await stored(c.key)).toEqual([{ response_status: 201, locked_by: null }]);
  });
});
