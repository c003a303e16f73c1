import type { TestingModule } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { Clock, ManualClock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { sql, withEntries } from '../../src/database/sql';
import { SpendModule } from '../../src/spend/spend.module';
import { type SpendAdmission, SpendService } from '../../src/spend/spend.service';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';

/** ENGINE_MAX_TOKENS 88 + 512 + a token per byte of 100: every reply below is estimated at 700. */
const ESTIMATE = 700;
const PROMPT = ['x'.repeat(100)];

/**
 * The spend module alone on a real PostgreSQL, without HTTP ("medium" spec): SpendService's
 * admissions against token budgets held in spend_reservations (contract §23, §29), time moved by a
 * ManualClock, the budgets written as organization_limits rows (test/support/factory.ts).
 */
describe('SpendService (real database)', () => {
  const clock = new ManualClock(Date.parse('2031-05-20T12:00:00.000Z'));
  let moduleRef: TestingModule;
  let spend: SpendService;
  let database: Database;
  let factory: Factory;

  beforeAll(async () => {
    moduleRef = await moduleAlone(
      [SpendModule],
      { RESPONSE_ENGINE: 'openai', OPENAI_MODEL: 'model-a', ENGINE_MAX_TOKENS: '88' },
      (builder) => builder.overrideProvider(Clock).useValue(clock),
    );
    spend = moduleRef.get(SpendService);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterAll(() => moduleRef?.close());

  /** An organization with these budgets, and one of its end users. */
  async function organization(limits: {
    monthlyTokenBudget?: number;
    endUserDailyTokenBudget?: number;
  }) {
    const organizationId = await factory.organization();
    await factory.limits(organizationId, limits);
    return { organizationId, endUserId: await endUser(organizationId) };
  }

  const endUser = (organizationId: string) => factory.endUser(organizationId, randomUUID());

  const admit = (org: { organizationId: string; endUserId: string }, endUserId = org.endUserId) =>
    spend.admit({ organizationId: org.organizationId, endUserId, promptTexts: PROMPT });

  async function held(organizationId: string): Promise<Array<{ budget: string; tokens: number }>> {
    return database.rows(
      sql`SELECT budget, tokens FROM spend_reservations WHERE organization_id = ${organizationId}
           ORDER BY budget`,
    );
  }

  it('estimates a token per byte, so text of rare characters is not admitted for a third of its cost', async () => {
    // 1,000 mathematical letters of 4 bytes each: 4,000 bytes, up to 4,000 tokens of prompt.
    expect(spend.estimate(['𝔘'.repeat(1_000)])).toBe(4_000 + 512 + 88);
    expect(spend.estimate(['hello', ' world'])).toBe(11 + 512 + 88);
  });

  it('admits while spent + reserved is below the budget; the refusal counts both', async () => {
    const org = await organization({ monthlyTokenBudget: 2_000 });
    await factory.monthTokens(org.organizationId, '2031-05-01', { prompt: 400, completion: 200 });
    // 600 spent: 600 + 700 < 2,000, 600 + 1,400 is not.
    await admit(org);
    await admit(org);
    const refused = admit(org);
    await expectAppError(refused, 'budget_exceeded');
    await expect(refused).rejects.toMatchObject({
      detailsObject: {
        scope: 'organization',
        limit: 2_000,
        used: 600 + 2 * ESTIMATE,
        resets_at: '2031-06-01T00:00:00.000Z',
      },
    });
    expect(await held(org.organizationId)).toEqual([
      { budget: 'month:2031-05-01', tokens: ESTIMATE },
      { budget: 'month:2031-05-01', tokens: ESTIMATE },
    ]);
  });

  it('of 50 concurrent admissions, admits exactly as many as the budget has room for', async () => {
    const org = await organization({ monthlyTokenBudget: 10 * ESTIMATE });
    const outcomes = await Promise.allSettled(Array.from({ length: 50 }, () => admit(org)));
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(10);
    expect(await held(org.organizationId)).toHaveLength(10);
  });

  it('checks the month and the end user’s day, and holds nothing when either refuses', async () => {
    const org = await organization({
      monthlyTokenBudget: 100_000,
      endUserDailyTokenBudget: ESTIMATE,
    });
    const first = await admit(org);
    expect((await held(org.organizationId)).map((row) => row.budget)).toEqual([
      `day:2031-05-20:${org.endUserId}`,
      'month:2031-05-01',
    ]);
    await expect(admit(org)).rejects.toMatchObject({
      code: 'budget_exceeded',
      detailsObject: { scope: 'end_user', limit: ESTIMATE, used: ESTIMATE },
    });
    // The refused reply left the month as it was; another end user goes on.
    expect(await held(org.organizationId)).toHaveLength(2);
    await admit(org, await endUser(org.organizationId));
    expect(await held(org.organizationId)).toHaveLength(4);
    // Given back (the reply failed): the day has room again.
    spend.release(first);
    await waitFor(async () => (await held(org.organizationId)).length === 2);
    await admit(org);
  });

  it('swaps a reservation for the reply’s tokens in the reply’s own statement', async () => {
    const org = await organization({ monthlyTokenBudget: 100_000 });
    const admission = await admit(org);
    expect(admission.reservation?.budgets).toEqual(['month:2031-05-01']);
    // No tokens, no meter events: the reservation's step alone.
    const exchange = {
      at: clock.now(),
      relationship: undefined as never,
      tokens: null,
      tokensUsed: 0,
    };
    const { steps } = spend.exchangeSteps(admission, exchange);
    expect(steps).toHaveLength(1);
    await database.rows(withEntries(steps, sql`SELECT 1`));
    expect(await held(org.organizationId)).toEqual([]);
    spend.settled(admission);
    expect(spend.exchangeSteps(admission, exchange).steps).toEqual([]);
  });

  it("holds a turn's tokens so far with its estimate between rounds, one hold at a time, until they settle", async () => {
    const org = await organization({ monthlyTokenBudget: 3_000 });
    const turn = await admit(org);
    const tokensHeld = async () =>
      (await held(org.organizationId)).map((row) => row.tokens).sort((a, b) => a - b);
    // A first round spent 2,000: held with the estimate (700 for the next call) beside it.
    await spend.assertRoomFor(turn, org.endUserId, 2_000);
    expect(await tokensHeld()).toEqual([ESTIMATE, 2_000]);
    // A concurrent reply counts them: 2,700 of 3,000 leaves room for one more admission only.
    const other = await admit(org);
    await expectAppError(admit(org), 'budget_exceeded');
    spend.release(other);
    await waitFor(async () => (await held(org.organizationId)).length === 2);
    // The next round's total replaces the first round's hold, not adds to it.
    await spend.assertRoomFor(turn, org.endUserId, 2_200);
    expect(await tokensHeld()).toEqual([ESTIMATE, 2_200]);
    // Its own estimate does not refuse the turn: 2,400 spent + 700 for the next call passes
    // 3,000, but only what was spent is weighed (a token per byte is a bound, not a forecast).
    await spend.assertRoomFor(turn, org.endUserId, 2_400);
    expect(await tokensHeld()).toEqual([ESTIMATE, 2_400]);
    // What it spent reaches the budget: refused (the turn ends with 402), it holds nothing more.
    await expectAppError(spend.assertRoomFor(turn, org.endUserId, 3_000), 'budget_exceeded');
    expect(await tokensHeld()).toEqual([]);
    // The reply's statement settles the hold.
    await spend.assertRoomFor(turn, org.endUserId, 1_000);
    expect(await tokensHeld()).toEqual([ESTIMATE, 1_000]);
    const { steps } = spend.exchangeSteps(turn, {
      at: clock.now(),
      relationship: undefined as never,
      tokens: null,
      tokensUsed: 0,
    });
    await database.rows(withEntries(steps, sql`SELECT 1`));
    expect(await held(org.organizationId)).toEqual([]);
  });

  it("estimates the next call with what the turn's calls and outputs added to its prompt", async () => {
    const org = await organization({ monthlyTokenBudget: 21_000 });
    const turn = await admit(org);
    const tokensHeld = async () =>
      (await held(org.organizationId)).map((row) => row.tokens).sort((a, b) => a - b);
    // A tool answered 15,000 bytes (and 1,000 of another's, in two-byte characters): the next
    // call sends them, a token a byte by the estimate's bound.
    await spend.assertRoomFor(turn, org.endUserId, 200, ['x'.repeat(15_000), 'é'.repeat(500)]);
    expect(await tokensHeld()).toEqual([200, ESTIMATE + 16_000]);
    // Each round's hold is made from the admitted estimate again, not from the last hold.
    await spend.assertRoomFor(turn, org.endUserId, 400, ['x'.repeat(20_000)]);
    expect(await tokensHeld()).toEqual([400, ESTIMATE + 20_000]);
    // Held, it counts against concurrent replies: 400 + 20,700 of 21,000 leaves none (the
    // admitted estimate alone, 1,100 held, left room for many).
    await expectAppError(admit(org), 'budget_exceeded');
  });

  it("makes a long turn's estimate again each round, so it never lapses while the turn runs", async () => {
    const org = await organization({ monthlyTokenBudget: 1_000 + ESTIMATE });
    const turn = await admit(org);
    // Rounds 50 s apart: past the admission's 60 s, each round's hold is younger than that.
    for (const spent of [100, 200, 300]) {
      clock.advance(50_000);
      await spend.assertRoomFor(turn, org.endUserId, spent);
      await spend.purgeLapsed();
      expect(
        (await held(org.organizationId)).map((row) => row.tokens).sort((a, b) => a - b),
      ).toEqual([spent, ESTIMATE]);
    }
    // So the estimate for the next call still holds room against concurrent replies: one more
    // fits (1,000 held of 1,700), the one after it does not.
    await admit(org);
    await expectAppError(admit(org), 'budget_exceeded');
  });

  it('stops counting a reservation at its expiry (ENGINE_TIMEOUT_MS + 60 s), and purges it', async () => {
    const org = await organization({ monthlyTokenBudget: ESTIMATE });
    await admit(org);
    await expectAppError(admit(org), 'budget_exceeded');
    // ENGINE_TIMEOUT_MS is 30 s by default: the reservation lapses 90 s after it was made. At
    // 62 s (a 30 s model call, a round of 30 s webhook tools, their checks) it still counts.
    clock.advance(62_000);
    await spend.purgeLapsed();
    await expectAppError(admit(org), 'budget_exceeded');
    clock.advance(28_000);
    const later: SpendAdmission = await admit(org);
    expect(later.reservation).not.toBeNull();
    await spend.purgeLapsed();
    expect(await held(org.organizationId)).toHaveLength(1);

    // A backlog larger than one batch (1,000) goes in one purge, batch after batch.
    await database.count(
      sql`INSERT INTO spend_reservations (organization_id, budget, reservation_id, tokens,
                                          expires_at)
          SELECT ${org.organizationId}, 'month:' || n, gen_random_uuid(), 1,
                 ${clock.now()}::timestamptz
            FROM generate_series(1, 1500) n`,
    );
    // A command's module starts no timer: this purge takes them all (with any other lapsed row).
    expect(await spend.purgeLapsed()).toBeGreaterThanOrEqual(1500);
    expect(await held(org.organizationId)).toHaveLength(1);
  });

  it('reserves in the month and day it is made in', async () => {
    const org = await organization({ monthlyTokenBudget: ESTIMATE });
    const saved = clock.now();
    clock.set(new Date('2031-05-31T23:59:59.000Z'));
    try {
      await admit(org);
      await expectAppError(admit(org), 'budget_exceeded');
      clock.set(new Date('2031-06-01T00:00:00.000Z'));
      await admit(org);
      expect((await held(org.organizationId)).map((row) => row.budget)).toEqual([
        'month:2031-05-01',
        'month:2031-06-01',
      ]);
    } finally {
      clock.set(saved);
    }
  });
});

async function waitFor(done: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
