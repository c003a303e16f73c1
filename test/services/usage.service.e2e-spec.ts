import type { TestingModule } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Clock, ManualClock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { sql, withEntries, type WithEntry } from '../../src/database/sql';
import { UsageModule } from '../../src/usage/usage.module';
import { UsageService } from '../../src/usage/usage.service';
import { relationshipActivityStep, tokenUsageStep } from '../../src/usage/usage.steps';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';

/**
 * The usage module alone on a real PostgreSQL, without HTTP ("medium" spec): UsageService's
 * month's relationships and token counts as /v1/respond's statement records them (its steps run
 * in one statement here, as RespondRepository.storeExchange runs them), with a clock the spec
 * sets to a month's edge.
 */
describe('UsageService (database)', () => {
  let moduleRef: TestingModule;
  let usage: UsageService;
  let database: Database;
  let factory: Factory;
  let organizationId: string;
  let personalityIds: string[];
  const clock = new ManualClock();

  beforeAll(async () => {
    moduleRef = await moduleAlone([UsageModule], {}, (builder) =>
      builder.overrideProvider(Clock).useValue(clock),
    );
    usage = moduleRef.get(UsageService);
    database = moduleRef.get(Database);
    factory = new Factory(database);
    organizationId = await factory.organization();
    personalityIds = [
      await factory.personality(organizationId, 'Sage 1'),
      await factory.personality(organizationId, 'Sage 2'),
    ];
  });

  afterAll(() => moduleRef?.close());

  /** The exchange's steps in one statement, as RespondRepository.storeExchange runs them. */
  const storeExchange = (steps: WithEntry[]) =>
    database.count(withEntries(steps, sql`SELECT 1`), { prepared: true });

  /** What /v1/respond records for one exchange, at the clock's time. */
  async function talk(
    endUserId: string,
    personalityId: string,
    tokens?: [number, number, number?],
    model: string | null = 'model-a',
  ) {
    const at = clock.now();
    await storeExchange([
      relationshipActivityStep({ organizationId, endUserId, personalityId, at }),
      ...(tokens
        ? [
            tokenUsageStep({
              organizationId,
              endUserId,
              personalityId,
              apiKeyId: null,
              at,
              model,
              promptTokens: tokens[0],
              completionTokens: tokens[1],
              cachedTokens: tokens[2] ?? 0,
            }),
          ]
        : []),
    ]);
  }

  /** A new end user of the organization: its internal id and its user_id. */
  const newEndUser = async () => {
    const userId = `usage-${randomUUID()}`;
    return { id: await factory.endUser(organizationId, userId), user_id: userId };
  };

  it('counts each (end user, personality) pair once per UTC month, across repeats and races', async () => {
    clock.set(new Date('2031-01-31T23:59:59.999Z'));
    expect(usage.currentMonth()).toBe('2031-01');
    const [alice, bob] = [await newEndUser(), await newEndUser()];

    await Promise.all(Array.from({ length: 8 }, () => talk(alice.id, personalityIds[0])));
    await talk(alice.id, personalityIds[1]);
    await talk(bob.id, personalityIds[0]);
    await talk(bob.id, personalityIds[0]);
    expect(await usage.activeRelationships(organizationId)).toEqual({
      month: '2031-01',
      active_relationships: 3,
    });

    // One millisecond later is another month: the same pair counts again there.
    clock.advance(1);
    expect(usage.currentMonth()).toBe('2031-02');
    await talk(alice.id, personalityIds[0]);
    expect(await usage.activeRelationships(organizationId)).toEqual({
      month: '2031-02',
      active_relationships: 1,
    });
    expect(await usage.activeRelationships(organizationId, '2031-01')).toEqual({
      month: '2031-01',
      active_relationships: 3,
    });
    expect(await usage.activeRelationships(organizationId, '2030-12')).toEqual({
      month: '2030-12',
      active_relationships: 0,
    });

    const items = await usage.items(organizationId, { month: '2031-01', limit: 2 });
    expect(items.data).toHaveLength(2);
    expect(items.has_more).toBe(true);
    const rest = await usage.items(organizationId, {
      month: '2031-01',
      limit: 2,
      startingAfter: items.data[1].id,
    });
    expect(rest.data).toHaveLength(1);
    expect(rest.has_more).toBe(false);
    const pairs = [...items.data, ...rest.data].map((i) => `${i.personality_id}/${i.user_id}`);
    expect(pairs.sort()).toEqual(
      [
        `${personalityIds[0]}/${alice.user_id}`,
        `${personalityIds[1]}/${alice.user_id}`,
        `${personalityIds[0]}/${bob.user_id}`,
      ].sort(),
    );
  });

  it('adds token counts to the month of the reply', async () => {
    clock.set(new Date('2032-05-31T23:59:59.000Z'));
    const carol = await newEndUser();
    await talk(carol.id, personalityIds[0], [10, 20, 8]);
    await talk(carol.id, personalityIds[0], [1, 2]);
    await talk(carol.id, personalityIds[0], [5, 5, 1], 'model-b');
    await talk(carol.id, personalityIds[0], [1000, 1000], 'model-b');
    await talk(carol.id, personalityIds[0], [3, 4], null);
    clock.set(new Date('2032-06-01T00:00:00.000Z'));
    await talk(carol.id, personalityIds[0], [100, 200]);
    expect(await usage.tokens(organizationId, '2032-05')).toEqual({
      month: '2032-05',
      requests: 5,
      prompt_tokens: 1019,
      completion_tokens: 1031,
      cached_tokens: 9,
      // Most replies first; a reply without a model counts in the month only.
      by_model: [
        {
          model: 'model-a',
          requests: 2,
          prompt_tokens: 11,
          completion_tokens: 22,
          cached_tokens: 8,
        },
        {
          model: 'model-b',
          requests: 2,
          prompt_tokens: 1005,
          completion_tokens: 1005,
          cached_tokens: 1,
        },
      ],
    });
    expect(await usage.tokens(organizationId)).toEqual({
      month: '2032-06',
      requests: 1,
      prompt_tokens: 100,
      completion_tokens: 200,
      cached_tokens: 0,
      by_model: [
        {
          model: 'model-a',
          requests: 1,
          prompt_tokens: 100,
          completion_tokens: 200,
          cached_tokens: 0,
        },
      ],
    });
    expect(await usage.tokens(organizationId, '2032-04')).toEqual({
      month: '2032-04',
      requests: 0,
      prompt_tokens: 0,
      completion_tokens: 0,
      cached_tokens: 0,
      by_model: [],
    });
  });

  it('erasure removes the pairs but keeps the count', async () => {
    clock.set(new Date('2033-03-10T12:00:00.000Z'));
    const dave = await newEndUser();
    await talk(dave.id, personalityIds[0]);
    await moduleRef
      .get(DataSource)
      .transaction((manager) =>
        usage.eraseEndUsers(manager, [{ id: dave.id, organizationId, userId: dave.user_id }]),
      );
    expect(await usage.activeRelationships(organizationId)).toEqual({
      month: '2033-03',
      active_relationships: 1,
    });
    expect((await usage.items(organizationId, { limit: 10 })).data).toEqual([]);
  });

  it('refuses a cursor that names no item of the list', async () => {
    await expect(
      usage.items(organizationId, { limit: 10, startingAfter: `${personalityIds[0]}:nobody` }),
    ).rejects.toMatchObject({ code: 'validation_failed' });
  });
});
