import type { TestingModule } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import { IdempotencyModule } from '../../src/idempotency/idempotency.module';
import { IdempotencyRepository } from '../../src/idempotency/idempotency.repository';
import { IdempotencyService } from '../../src/idempotency/idempotency.service';
import {
  forgetEndUserAnswersStep,
  forgetPersonalityAnswersStep,
} from '../../src/idempotency/end-user-answers.step';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { HeldTransaction } from '../support/locks';
import { moduleAlone } from '../support/module-alone';

/**
 * IdempotencyRepository on a real database, the idempotency module alone without HTTP ("medium"
 * spec): the claims and answers of concurrent requests share statements (Batcher), so a batch can
 * hold one key twice, keys in any order, and answers of claims that no longer hold their key.
 */
describe('IdempotencyRepository (database)', () => {
  let moduleRef: TestingModule;
  let keys: IdempotencyRepository;
  let database: Database;
  let organizationId: string;
  const hash = Buffer.alloc(32, 7);
  const leaseMs = 30_000;
  const NOTHING = { subject: null, personalityId: null };

  beforeAll(async () => {
    moduleRef = await moduleAlone([IdempotencyModule]);
    keys = moduleRef.get(IdempotencyRepository);
    database = moduleRef.get(Database);
    organizationId = await new Factory(database).organization();
  });

  afterAll(() => moduleRef?.close());

  const claimOf = (key: string, requestId = randomUUID()) => ({
    scopeType: 'organization' as const,
    scopeId: organizationId,
    key,
    requestId,
  });
  const stored = (key: string) =>
    database.rows<{ response_status: number | null; locked_by: string | null }>(
      sql`SELECT response_status, locked_by FROM idempotency_keys
           WHERE scope_type = 'organization' AND scope_id = ${organizationId} AND key = ${key}`,
    );

  it('claims each key once when claims of the same keys arrive together, in any order', async () => {
    const names = Array.from({ length: 6 }, (_, i) => `batch-${i}-${randomUUID()}`);
    // 30 claims at once: the first goes alone, the rest share the next statements.
    const claims = Array.from({ length: 30 }, (_, i) => claimOf(names[(i * 7) % names.length]));
    const won = await Promise.all(
      claims.map((c) => keys.insert(c, hash, NOTHING, leaseMs, new Date())),
    );
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
    for (const c of held)
      expect(await keys.insert(c, hash, NOTHING, leaseMs, new Date())).toBe(true);
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

  it('stores the answers of keys no other transaction holds while one is held, then that one', async () => {
    const [heldKey, ...free] = Array.from({ length: 4 }, () => claimOf(`held-${randomUUID()}`));
    for (const c of [heldKey, ...free])
      expect(await keys.insert(c, hash, NOTHING, leaseMs, new Date())).toBe(true);
    // As a deletion's or an erasure's transaction holds a key it marks or deletes.
    const holder = await HeldTransaction.begin();
    try {
      await holder.run(
        `SELECT 1 FROM idempotency_keys WHERE scope_id = $1 AND key = $2 FOR UPDATE`,
        [organizationId, heldKey.key],
      );
      let heldAnswered = false;
      const heldAnswer = keys
        .complete(heldKey, { status: 201, body: '{}', subject: null }, new Date())
        .finally(() => (heldAnswered = true));
      const freeAnswers = Promise.all(
        free.map((c) => keys.complete(c, { status: 201, body: '{}', subject: null }, new Date())),
      );
      // Before, the held key's batch waited for the holder, and every answer after it too.
      let timer: NodeJS.Timeout | undefined;
      const notBefore = new Promise((resolve) => (timer = setTimeout(resolve, 5_000, 'waiting')));
      await expect(
        Promise.race([freeAnswers, notBefore]).finally(() => clearTimeout(timer)),
      ).resolves.toEqual([true, true, true]);
      for (const c of free)
        expect(await stored(c.key)).toEqual([{ response_status: 201, locked_by: null }]);
      await holder.untilWaitedOn();
      expect(heldAnswered).toBe(false);
      await holder.commit();
      await expect(heldAnswer).resolves.toBe(true);
      expect(await stored(heldKey.key)).toEqual([{ response_status: 201, locked_by: null }]);
    } finally {
      await holder.end();
    }
  });

  it('keeps no answer about an end user erased while their request ran', async () => {
    const service = moduleRef.get(IdempotencyService);
    const key = `erased-${randomUUID()}`;
    const begun = await service.begin(
      { scopeType: 'organization', scopeId: organizationId, key },
      randomUUID(),
      hash,
      [],
      { carriesData: true, hint: 'ada@example.com' },
    );
    if (begun.kind !== 'claimed') throw new Error(`not claimed: ${begun.kind}`);
    // The erasure commits while the request runs; its answer is stored after.
    await database.transaction((manager) =>
      service.forgetEndUsers(manager, [{ organizationId, userId: 'ada@example.com' }]),
    );
    await service.settleAnswer(begun.claim, 200, {
      user_id: 'ada@example.com',
      reply: { text: 'what the erased end user was told' },
    });
    // Before, the claim had no subject until its answer: the erasure missed it, and the answer
    // was kept for replay after the end user was gone. The key stays in progress, no longer the
    // request's: a retry meanwhile gets 409 (contract section 16), not a second run.
    expect(await stored(key)).toEqual([{ response_status: null, locked_by: 'erased' }]);
    await expectAppError(
      service.begin(
        { scopeType: 'organization', scopeId: organizationId, key },
        randomUUID(),
        hash,
        [],
        { carriesData: true, hint: 'ada@example.com' },
      ),
      'idempotency_key_in_progress',
    );
  });
  it('keeps no answer about an end user erased as it was being stored', async () => {
    const service = moduleRef.get(IdempotencyService);
    const key = `erased-storing-${randomUUID()}`;
    const begun = await service.begin(
      { scopeType: 'organization', scopeId: organizationId, key },
      'storing',
      hash,
      [],
      { carriesData: true, hint: 'bea@example.com' },
    );
    expect(begun.kind).toBe('claimed');
    const storing = await HeldTransaction.begin();
    try {
      await storing.run(
        `UPDATE idempotency_keys
            SET response_status = 200, response_body = '{"reply":"to bea"}', completed_at = now(),
                locked_by = NULL, locked_until = NULL
          WHERE scope_id = $1 AND key = $2`,
        [organizationId, key],
      );
      const erasing = database.transaction((manager) =>
        service.forgetEndUsers(manager, [{ organizationId, userId: 'bea@example.com' }]),
      );
      // Before, the erasure's snapshot held the key still running: it detached nothing (the
      // row had moved on) and deleted no answer, and the answer outlived the end user.
      await storing.untilWaitedOn();
      await storing.commit();
      await erasing;
    } finally {
      await storing.end();
    }
    expect(await stored(key)).toEqual([]);
  });

  it("gives a running key the end user it learns, whose data's deletion then marks it", async () => {
    const service = moduleRef.get(IdempotencyService);
    const key = `learnt-${randomUUID()}`;
    const ref = { scopeType: 'organization' as const, scopeId: organizationId, key };
    // A resumed turn's request: its end user is not in its path or body.
    const begun = await service.begin(ref, 'resuming', hash, [], { carriesData: true });
    if (begun.kind !== 'claimed') throw new Error(`not claimed: ${begun.kind}`);
    await service.runWithin(begun.claim, () =>
      service.aboutTurn({ userId: 'cy@example.com', personalityId: randomUUID() }),
    );
    await database.count(
      sql`WITH ${forgetEndUserAnswersStep('forgotten', organizationId, ['cy@example.com'])}
          SELECT 1`,
    );
    await service.settleAnswer(begun.claim, 200, { reply: { text: 'about a forgotten memory' } });
    // Its answer is not kept: the key goes, and a retry runs afresh.
    expect(await stored(key)).toEqual([]);
  });

  describe("a personality's deletion", () => {
    const begin = async (key: string, personalityId: string, requestId: string = randomUUID()) => {
      const begun = await moduleRef
        .get(IdempotencyService)
        .begin({ scopeType: 'organization', scopeId: organizationId, key }, requestId, hash, [], {
          carriesData: true,
          hint: 'dee@example.com',
          personalityHint: personalityId,
        });
      if (begun.kind !== 'claimed') throw new Error(`not claimed: ${begun.kind}`);
      return begun.claim;
    };
    const forget = (personalityId: string) =>
      database.transaction((manager) =>
        moduleRef.get(IdempotencyService).forgetPersonality(manager, organizationId, personalityId),
      );

    it("deletes the stored answers of the replies it spoke, and no other personality's", async () => {
      const service = moduleRef.get(IdempotencyService);
      const deleted = randomUUID();
      const kept = randomUUID();
      const spoken = `spoke-${randomUUID()}`;
      const other = `other-${randomUUID()}`;
      await service.settleAnswer(await begin(spoken, deleted), 200, { reply: { text: 'a' } });
      await service.settleAnswer(await begin(other, kept), 200, { reply: { text: 'b' } });
      await forget(deleted);
      // Before, both stayed: a retry replayed the deleted personality's reply for 24 hours.
      expect(await stored(spoken)).toEqual([]);
      expect(await stored(other)).toEqual([{ response_status: 200, locked_by: null }]);
    });

    it('marks a reply still running: the request keeps its key, and its answer is not kept', async () => {
      const service = moduleRef.get(IdempotencyService);
      const personalityId = randomUUID();
      const key = `running-${randomUUID()}`;
      const claim = await begin(key, personalityId, 'running');
      await forget(personalityId);
      // Still the request's: a retry meanwhile gets 409, not a second run.
      expect(await stored(key)).toEqual([{ response_status: null, locked_by: 'running' }]);
      await expectAppError(
        service.begin(
          { scopeType: 'organization', scopeId: organizationId, key },
          randomUUID(),
          hash,
          [],
          { carriesData: true, hint: 'dee@example.com', personalityHint: personalityId },
        ),
        'idempotency_key_in_progress',
      );
      await service.settleAnswer(claim, 200, { reply: { text: 'of a deleted personality' } });
      expect(await stored(key)).toEqual([]);
    });

    it("finds a resumed turn's key by the personality it learns", async () => {
      const service = moduleRef.get(IdempotencyService);
      const personalityId = randomUUID();
      const key = `resumed-${randomUUID()}`;
      const ref = { scopeType: 'organization' as const, scopeId: organizationId, key };
      const begun = await service.begin(ref, 'resuming', hash, [], { carriesData: true });
      if (begun.kind !== 'claimed') throw new Error(`not claimed: ${begun.kind}`);
      await service.runWithin(begun.claim, () =>
        service.aboutTurn({ userId: 'dee@example.com', personalityId }),
      );
      await forget(personalityId);
      await service.settleAnswer(begun.claim, 200, { reply: { text: 'resumed' } });
      expect(await stored(key)).toEqual([]);
    });

    it('reads its keys by their personality, never the whole table, with statistics and without', async () => {
      const busy = await new Factory(database).organization();
      const personalityId = randomUUID();
      // A busy organization: 20,000 keys of 200 personalities, 100 of them this one's.
      await database.count(
        sql`INSERT INTO idempotency_keys (scope_type, scope_id, key, request_hash, personality_id,
                                          response_status, created_at, completed_at)
            SELECT 'organization', ${busy}::uuid, 'busy-' || n, ${hash},
                   CASE WHEN n % 200 = 0 THEN ${personalityId}::uuid
                        ELSE md5((n % 200)::text)::uuid END,
                   200, now(), now()
              FROM generate_series(1, 20000) n`,
      );
      type PlanNode = {
        'Node Type': string;
        'Relation Name'?: string;
        'Index Name'?: string;
        Plans?: PlanNode[];
      };
      const readsOf = (node: PlanNode): string[] => [
        ...(node['Relation Name'] === 'idempotency_keys' && node['Node Type'].endsWith('Scan')
          ? [node['Index Name'] ?? node['Node Type']]
          : []),
        ...(node.Plans ?? []).flatMap(readsOf),
      ];
      const reads = async () => {
        const [row] = await database.rows<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
          sql`EXPLAIN (FORMAT JSON)
              WITH ${forgetPersonalityAnswersStep('forgotten', busy, personalityId)} SELECT 1`,
        );
        return readsOf(row['QUERY PLAN'][0].Plan);
      };
      // As after a bulk import (no statistics: autovacuum is off here), then as production has them.
      for (const analyzed of [false, true]) {
        if (analyzed) await database.count(sql`ANALYZE idempotency_keys`);
        const found = await reads();
        expect({ analyzed, first: found[0] }).toEqual({
          analyzed,
          first: 'idempotency_keys_personality_idx',
        });
        expect({ analyzed, found }).toEqual({
          analyzed,
          found: found.map(() => expect.stringMatching(/_idx$|_pkey$/)),
        });
      }
    });

    it('takes a request body whose personality_id is no UUID as naming none', async () => {
      const key = `not-a-uuid-${randomUUID()}`;
      // The hint is read before validation: a claim batched with it must not fail on the cast.
      const personalityId = randomUUID();
      // The first claim goes alone; the two after it share one INSERT.
      const [, claim] = await Promise.all([
        begin(`${key}-a`, personalityId),
        begin(key, 'not-a-uuid'),
        begin(`${key}-v`, personalityId),
      ]);
      expect(claim.personalityId).toBeNull();
      expect(
        await database.rows<{ key: string; personality_id: string | null }>(
          sql`SELECT key, personality_id FROM idempotency_keys
               WHERE scope_id = ${organizationId} AND key LIKE ${`${key}%`} ORDER BY key`,
        ),
      ).toEqual([
        { key, personality_id: null },
        { key: `${key}-a`, personality_id: personalityId },
        { key: `${key}-v`, personality_id: personalityId },
      ]);
    });
  });

  it('takes over an answer stored over the mark by an instance of an earlier version', async () => {
    const service = moduleRef.get(IdempotencyService);
    const key = `stored-over-${randomUUID()}`;
    // Such an instance, in a rolling deploy, stores the answer whatever the mark.
    await database.count(
      sql`INSERT INTO idempotency_keys (scope_type, scope_id, key, request_hash, subject,
                                        response_status, response_body, answer_forgotten,
                                        created_at, completed_at)
          VALUES ('organization', ${organizationId}, ${key}, ${hash}, ${Buffer.alloc(32, 1)},
                  201, '{"content":"a deleted fact"}', true, now(), now())`,
    );
    const ref = { scopeType: 'organization' as const, scopeId: organizationId, key };
    // Not replayed, and free for any request (a fresh one need not repeat the body).
    const again = await service.begin(ref, 'again', Buffer.alloc(32, 9), [], {
      carriesData: true,
    });
    expect(again.kind).toBe('claimed');
    expect(await stored(key)).toEqual([{ response_status: null, locked_by: 'again' }]);
  });
});
