import { randomUUID } from 'node:crypto';
import type { TestingModule } from '@nestjs/testing';
import type { ApiKeyCaller, CallerContext, Scope } from '../../src/common/auth/caller';
import type { AppError } from '../../src/common/errors/app-error';
import { Clock, ManualClock } from '../../src/common/time/clock';
import { createValidationPipe } from '../../src/common/validation/validation.pipe';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import type { Role } from '../../src/organizations/entities/membership.entity';
import { UpdateLimitsDto } from '../../src/spend/dto/limits.dto';
import { LIMITS_CACHE_MS, LimitsService, NONE } from '../../src/spend/limits.service';
import { SpendModule } from '../../src/spend/spend.module';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { INVALID_LIMITS_BODIES } from '../support/limits-bodies';
import { userCaller } from '../support/identity';
import { moduleAlone } from '../support/module-alone';

const NO_LIMITS = {
  monthly_token_budget: null,
  end_user_daily_token_budget: null,
  end_user_rate_limit: null,
};

/**
 * The spend module alone on a real PostgreSQL, without HTTP ("medium" spec): LimitsService, an
 * organization's spend limits (contract §23, docs/spend-control.md), called directly and checked
 * against organization_limits, usage_thresholds_reached and webhook_events. No Redis; time is a
 * ManualClock (the thresholds' month, the cache's TTL). test/spend-control.e2e-spec.ts checks the
 * same routes over HTTP.
 */
describe('LimitsService (real database)', () => {
  const clock = new ManualClock(Date.parse('2031-05-20T12:00:00.000Z'));
  const pipe = createValidationPipe();
  let moduleRef: TestingModule;
  let limits: LimitsService;
  let database: Database;
  let factory: Factory;

  beforeAll(async () => {
    moduleRef = await moduleAlone(
      [SpendModule],
      { SMTP_URL: undefined, REDIS_URL: undefined },
      (builder) => builder.overrideProvider(Clock).useValue(clock),
    );
    limits = moduleRef.get(LimitsService);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterAll(() => moduleRef?.close());

  /** A fresh organization with a user of each role acting for it, and one API key per scope. */
  async function tenant() {
    const organizationId = await factory.organization();
    const user = async (role: Role) =>
      userCaller(await factory.member(organizationId, role), organizationId, role);
    const key = (scope: Scope): ApiKeyCaller => ({
      kind: 'api_key',
      apiKeyId: randomUUID(),
      organizationId,
      scopes: [scope],
      requestId: randomUUID(),
      ip: '192.0.2.30',
    });
    return {
      organizationId,
      owner: await user('owner'),
      admin: await user('admin'),
      member: await user('member'),
      readKey: key('read'),
      writeKey: key('read_write'),
      adminKey: key('admin'),
    };
  }

  /** The organization's row as stored, null without one. */
  async function stored(organizationId: string) {
    const [row] = await database.rows<Record<string, unknown>>(
      sql`SELECT monthly_token_budget::text, end_user_daily_token_budget::text, end_user_rps,
                 end_user_burst, updated_at
            FROM organization_limits WHERE organization_id = ${organizationId}`,
    );
    return row ?? null;
  }

  /** The audit events of the organization's limit changes, in no order (their ids have none). */
  function audited(organizationId: string) {
    return database.rows<{ actor_id: string; details: unknown; created_at: Date }>(
      sql`SELECT actor_id, details, created_at FROM audit_events
           WHERE organization_id = ${organizationId} AND action = 'limits.updated'`,
    );
  }

  async function thresholds(organizationId: string) {
    return database.rows<{
      month: string;
      threshold: number;
      used: string;
      token_limit: string;
      reached_at: Date;
    }>(
      sql`SELECT to_char(month, 'YYYY-MM-DD') AS month, threshold, used::text,
                 token_limit::text, reached_at
            FROM usage_thresholds_reached WHERE organization_id = ${organizationId}
           ORDER BY month, threshold`,
    );
  }

  async function thresholdEvents(organizationId: string) {
    return database.rows<{ data: Record<string, unknown>; attempts: number }>(
      sql`SELECT e.data, (SELECT count(*)::int FROM webhook_delivery_attempts a
                           WHERE a.event_id = e.id AND a.next_attempt_at = e.created_at) AS attempts
            FROM webhook_events e
           WHERE e.organization_id = ${organizationId} AND e.type = 'usage.threshold_reached'
           ORDER BY e.data->>'month', (e.data->>'threshold')::int`,
    );
  }

  async function subscribe(organizationId: string): Promise<void> {
    await database.rows(
      sql`INSERT INTO webhook_endpoints (organization_id, url, events, secret)
          VALUES (${organizationId}, 'https://hooks.example.com/spend',
                  ARRAY['usage.threshold_reached'], 'whsec_never-sent')`,
    );
  }

  /** The body as the controller receives it: through the application's validation pipe. */
  function patchBody(body: unknown): Promise<UpdateLimitsDto> {
    return pipe.transform(body, {
      type: 'body',
      metatype: UpdateLimitsDto,
    }) as Promise<UpdateLimitsDto>;
  }

  describe('who reads and who changes them', () => {
    it('members and any key of the organization read; owners, admins and admin keys change', async () => {
      const t = await tenant();
      for (const reader of [t.owner, t.admin, t.member, t.readKey, t.writeKey, t.adminKey]) {
        expect(await limits.get(reader, t.organizationId)).toEqual(NO_LIMITS);
      }
      const changers: CallerContext[] = [t.owner, t.admin, t.adminKey];
      for (const [i, changer] of changers.entries()) {
        const budget = 1_000 * (i + 1);
        expect(
          await limits.update(changer, t.organizationId, { monthly_token_budget: budget }),
        ).toEqual({ ...NO_LIMITS, monthly_token_budget: budget });
      }
      for (const refused of [t.member, t.readKey, t.writeKey]) {
        await expectAppError(
          limits.update(refused, t.organizationId, { monthly_token_budget: 1 }),
          'insufficient_scope',
        );
      }
      expect(await limits.get(t.member, t.organizationId)).toEqual({
        ...NO_LIMITS,
        monthly_token_budget: 3_000,
      });
    });

    it('another organization is not found: its keys, its members, a user of no organization', async () => {
      const t = await tenant();
      await limits.update(t.admin, t.organizationId, { monthly_token_budget: 500 });
      const other = await tenant();
      const strangers: CallerContext[] = [
        other.owner,
        other.adminKey,
        // A user of no organization at all.
        userCaller(randomUUID(), other.organizationId, 'owner'),
      ];
      for (const stranger of strangers) {
        await expectAppError(limits.get(stranger, t.organizationId), 'not_found');
        await expectAppError(
          limits.update(stranger, t.organizationId, { monthly_token_budget: 1 }),
          'not_found',
        );
      }
      expect((await limits.get(t.member, t.organizationId)).monthly_token_budget).toBe(500);
    });

    it('a user acting for another organization is judged by their role in this one, read each time', async () => {
      const t = await tenant();
      const elsewhere = await factory.organization();
      // The admin of t, their token acting for another organization they own.
      await database.rows(
        sql`INSERT INTO memberships (organization_id, user_id, role)
            VALUES (${elsewhere}, ${t.admin.userId}, 'owner')`,
      );
      const admin = userCaller(t.admin.userId, elsewhere, 'owner');
      await limits.update(admin, t.organizationId, { end_user_daily_token_budget: 70 });
      // Demoted in t: refused at once (no membership cached without Redis).
      await database.rows(
        sql`UPDATE memberships SET role = 'member'
             WHERE organization_id = ${t.organizationId} AND user_id = ${t.admin.userId}`,
      );
      await expectAppError(
        limits.update(admin, t.organizationId, { end_user_daily_token_budget: 1 }),
        'insufficient_scope',
      );
      expect(await limits.get(admin, t.organizationId)).toEqual({
        ...NO_LIMITS,
        end_user_daily_token_budget: 70,
      });
      await database.rows(
        sql`DELETE FROM memberships
             WHERE organization_id = ${t.organizationId} AND user_id = ${t.admin.userId}`,
      );
      await expectAppError(limits.get(admin, t.organizationId), 'not_found');
    });

    it('a refused change writes nothing', async () => {
      const t = await tenant();
      await expectAppError(
        limits.update(t.member, t.organizationId, { monthly_token_budget: 5 }),
        'insufficient_scope',
      );
      expect(await stored(t.organizationId)).toBeNull();
      expect(await audited(t.organizationId)).toEqual([]);
    });
  });

  describe('changes', () => {
    it('changes only the limits named; null clears one; the bucket goes and comes whole', async () => {
      const t = await tenant();
      const set = await limits.update(t.admin, t.organizationId, {
        monthly_token_budget: 1_000_000,
        end_user_rate_limit: { rps: 0.5, burst: 3 },
      });
      expect(set).toEqual({
        monthly_token_budget: 1_000_000,
        end_user_daily_token_budget: null,
        end_user_rate_limit: { rps: 0.5, burst: 3 },
      });
      expect(await stored(t.organizationId)).toEqual({
        monthly_token_budget: '1000000',
        end_user_daily_token_budget: null,
        end_user_rps: 0.5,
        end_user_burst: 3,
        updated_at: clock.now(),
      });

      clock.advance(1_000);
      const merged = await limits.update(t.admin, t.organizationId, {
        end_user_daily_token_budget: Number.MAX_SAFE_INTEGER,
        end_user_rate_limit: null,
      });
      expect(merged).toEqual({
        monthly_token_budget: 1_000_000,
        end_user_daily_token_budget: Number.MAX_SAFE_INTEGER,
        end_user_rate_limit: null,
      });
      expect(await stored(t.organizationId)).toEqual({
        monthly_token_budget: '1000000',
        end_user_daily_token_budget: String(Number.MAX_SAFE_INTEGER),
        end_user_rps: null,
        end_user_burst: null,
        updated_at: clock.now(),
      });
      expect(await limits.get(t.member, t.organizationId)).toEqual(merged);

      // Nothing named: nothing changes.
      expect(await limits.update(t.admin, t.organizationId, {})).toEqual(merged);
      const cleared = await limits.update(t.owner, t.organizationId, {
        monthly_token_budget: null,
        end_user_daily_token_budget: null,
      });
      expect(cleared).toEqual(NO_LIMITS);
      expect(await limits.get(t.readKey, t.organizationId)).toEqual(NO_LIMITS);
      expect(await stored(t.organizationId)).toMatchObject({
        monthly_token_budget: null,
        end_user_daily_token_budget: null,
        end_user_rps: null,
        end_user_burst: null,
      });
      // Each change is in the audit log, by whom, when (the Clock's) and as the PATCH named it;
      // the PATCH naming nothing is not.
      const admin = t.admin.userId;
      const owner = t.owner.userId;
      const events = await audited(t.organizationId);
      // The events' ids are not in their order: compared as a set.
      expect(events).toHaveLength(3);
      expect(events).toEqual(
        expect.arrayContaining([
          {
            actor_id: admin,
            details: {
              monthly_token_budget: 1_000_000,
              end_user_rate_limit: { rps: 0.5, burst: 3 },
            },
            created_at: new Date(clock.nowMs() - 1_000),
          },
          {
            actor_id: admin,
            details: {
              end_user_daily_token_budget: Number.MAX_SAFE_INTEGER,
              end_user_rate_limit: null,
            },
            created_at: clock.now(),
          },
          {
            actor_id: owner,
            details: { monthly_token_budget: null, end_user_daily_token_budget: null },
            created_at: clock.now(),
          },
        ]),
      );
    });

    it('concurrent changes of different limits all land, the first ones too; each answers its own', async () => {
      const t = await tenant();
      // Round 0 runs before the organization has a row: the concurrent inserts meet on it.
      for (const [round, [monthly, daily, rps]] of [
        [1_000, 100, 1],
        [2_000, 200, 2],
        [3_000, 300, 3],
      ].entries()) {
        const bucket = { rps, burst: rps * 10 };
        const answers = await Promise.all([
          limits.update(t.admin, t.organizationId, { monthly_token_budget: monthly }),
          limits.update(t.owner, t.organizationId, { end_user_daily_token_budget: daily }),
          limits.update(t.adminKey, t.organizationId, { end_user_rate_limit: bucket }),
        ]);
        expect(answers[0].monthly_token_budget).toBe(monthly);
        expect(answers[1].end_user_daily_token_budget).toBe(daily);
        expect(answers[2].end_user_rate_limit).toEqual(bucket);
        expect({ round, limits: await limits.get(t.member, t.organizationId) }).toEqual({
          round,
          limits: {
            monthly_token_budget: monthly,
            end_user_daily_token_budget: daily,
            end_user_rate_limit: bucket,
          },
        });
      }
    });

    it('takes whole budgets of 1 to 2^53 − 1 and a bucket of rps > 0 and burst ≥ 1, or null', async () => {
      const valid: unknown[] = [
        {},
        { monthly_token_budget: 1 },
        { monthly_token_budget: Number.MAX_SAFE_INTEGER },
        { monthly_token_budget: null },
        { end_user_daily_token_budget: 5, end_user_rate_limit: { rps: 0.25, burst: 1 } },
        { end_user_rate_limit: null },
      ];
      for (const body of valid) {
        await expect(patchBody(body)).resolves.toEqual(body);
      }
      const invalid = INVALID_LIMITS_BODIES;
      for (const body of invalid) {
        const error = await patchBody(body).then(
          () => undefined,
          (thrown: unknown) => thrown,
        );
        expect({ body, code: (error as AppError | undefined)?.code }).toEqual({
          body,
          code: 'validation_failed',
        });
      }
    });
  });

  describe('thresholds reached when a budget is lowered', () => {
    it('records each threshold the month already reached, once per month, with its event', async () => {
      const t = await tenant();
      await subscribe(t.organizationId);
      await factory.monthTokens(t.organizationId, '2031-05-01', { prompt: 900, completion: 400 });
      // Last month's tokens count for nothing this month.
      await factory.monthTokens(t.organizationId, '2031-04-01', { prompt: 90_000, completion: 0 });

      await limits.update(t.admin, t.organizationId, { monthly_token_budget: 10_000 });
      expect(await thresholds(t.organizationId)).toEqual([]);

      // 1,300 of 2,000: 65 %.
      const loweredAt = clock.now();
      await limits.update(t.admin, t.organizationId, { monthly_token_budget: 2_000 });
      expect(await thresholds(t.organizationId)).toEqual([
        {
          month: '2031-05-01',
          threshold: 50,
          used: '1300',
          token_limit: '2000',
          reached_at: loweredAt,
        },
      ]);

      // 1,300 of 1,300: 80 % and 100 %, at the time of this change.
      clock.advance(60_000);
      const againAt = clock.now();
      await limits.update(t.owner, t.organizationId, { monthly_token_budget: 1_300 });
      // Lower still, raised, lowered again: nothing recorded twice.
      await limits.update(t.owner, t.organizationId, { monthly_token_budget: 100 });
      await limits.update(t.owner, t.organizationId, { monthly_token_budget: 100_000 });
      await limits.update(t.owner, t.organizationId, { monthly_token_budget: 200 });
      expect(await thresholds(t.organizationId)).toEqual([
        {
          month: '2031-05-01',
          threshold: 50,
          used: '1300',
          token_limit: '2000',
          reached_at: loweredAt,
        },
        {
          month: '2031-05-01',
          threshold: 80,
          used: '1300',
          token_limit: '1300',
          reached_at: againAt,
        },
        {
          month: '2031-05-01',
          threshold: 100,
          used: '1300',
          token_limit: '1300',
          reached_at: againAt,
        },
      ]);
      expect(await thresholdEvents(t.organizationId)).toEqual([
        { data: { month: '2031-05', threshold: 50, used: 1_300, limit: 2_000 }, attempts: 1 },
        { data: { month: '2031-05', threshold: 80, used: 1_300, limit: 1_300 }, attempts: 1 },
        { data: { month: '2031-05', threshold: 100, used: 1_300, limit: 1_300 }, attempts: 1 },
      ]);
    });

    it('a change of another limit checks the budget kept; clearing the budget records nothing', async () => {
      const t = await tenant();
      await limits.update(t.admin, t.organizationId, { monthly_token_budget: 1_500 });
      // Tokens stored without a threshold recorded: replies admitted under an older budget.
      await factory.monthTokens(t.organizationId, '2031-05-01', { prompt: 900, completion: 400 });
      await limits.update(t.admin, t.organizationId, { end_user_daily_token_budget: 5_000 });
      expect(
        (await thresholds(t.organizationId)).map(({ threshold, token_limit }) => ({
          threshold,
          token_limit,
        })),
      ).toEqual([
        { threshold: 50, token_limit: '1500' },
        { threshold: 80, token_limit: '1500' },
      ]);
      // No endpoint subscribes: recorded, no event written.
      expect(await thresholdEvents(t.organizationId)).toEqual([]);

      const u = await tenant();
      await factory.monthTokens(u.organizationId, '2031-05-01', { prompt: 10_000, completion: 0 });
      await limits.update(u.admin, u.organizationId, { monthly_token_budget: null });
      await limits.update(u.admin, u.organizationId, { end_user_rate_limit: { rps: 1, burst: 1 } });
      expect(await thresholds(u.organizationId)).toEqual([]);
      // A refused lowering records nothing either.
      await expectAppError(
        limits.update(u.member, u.organizationId, { monthly_token_budget: 1 }),
        'insufficient_scope',
      );
      expect(await thresholds(u.organizationId)).toEqual([]);
    });

    it('counts the month of the change: a new month starts its thresholds afresh', async () => {
      const t = await tenant();
      await factory.monthTokens(t.organizationId, '2031-05-01', { prompt: 600, completion: 0 });
      await limits.update(t.admin, t.organizationId, { monthly_token_budget: 1_000 });
      clock.set(new Date('2031-06-01T00:00:00.000Z'));
      try {
        await factory.monthTokens(t.organizationId, '2031-06-01', { prompt: 850, completion: 0 });
        await limits.update(t.admin, t.organizationId, { monthly_token_budget: 1_000 });
        expect(
          (await thresholds(t.organizationId)).map(({ month, threshold, used }) => ({
            month,
            threshold,
            used,
          })),
        ).toEqual([
          { month: '2031-05-01', threshold: 50, used: '600' },
          { month: '2031-06-01', threshold: 50, used: '850' },
          { month: '2031-06-01', threshold: 80, used: '850' },
        ]);
      } finally {
        clock.set(new Date('2031-05-20T12:00:00.000Z'));
      }
    });
    it('concurrent lowerings record each threshold once, with one event', async () => {
      const t = await tenant();
      await subscribe(t.organizationId);
      await factory.monthTokens(t.organizationId, '2031-05-01', { prompt: 1_000, completion: 300 });
      await Promise.all(
        [1_000, 900, 800, 700, 600, 500].map((budget, i) =>
          limits.update(i % 2 ? t.owner : t.admin, t.organizationId, {
            monthly_token_budget: budget,
          }),
        ),
      );
      expect((await thresholds(t.organizationId)).map((row) => row.threshold)).toEqual([
        50, 80, 100,
      ]);
      expect(
        (await thresholdEvents(t.organizationId)).map((event) => [
          event.data.threshold,
          event.attempts,
        ]),
      ).toEqual([
        [50, 1],
        [80, 1],
        [100, 1],
      ]);
    });
  });

  describe('forOrganization (the limits replies apply)', () => {
    it('applies numbers and a whole bucket; a change here is seen at once, a row written elsewhere within the TTL', async () => {
      const t = await tenant();
      expect(limits.cached(t.organizationId)).toBeUndefined();
      expect(await limits.forOrganization(t.organizationId)).toEqual(NONE);
      expect(limits.cached(t.organizationId)).toEqual(NONE);

      await limits.update(t.admin, t.organizationId, {
        monthly_token_budget: Number.MAX_SAFE_INTEGER,
        end_user_rate_limit: { rps: 2, burst: 5 },
      });
      // Dropped by the change before it answered.
      expect(limits.cached(t.organizationId)).toBeUndefined();
      const applied = {
        monthlyTokenBudget: Number.MAX_SAFE_INTEGER,
        endUserDailyTokenBudget: null,
        endUserBucket: { rps: 2, burst: 5 },
      };
      expect(await limits.forOrganization(t.organizationId)).toEqual(applied);

      // Another instance's change, without Redis: this copy serves until its TTL ends.
      await database.rows(
        sql`UPDATE organization_limits SET end_user_daily_token_budget = 9, end_user_rps = 4
             WHERE organization_id = ${t.organizationId}`,
      );
      clock.advance(LIMITS_CACHE_MS - 1);
      expect(await limits.forOrganization(t.organizationId)).toEqual(applied);
      clock.advance(1);
      expect(await limits.forOrganization(t.organizationId)).toEqual({
        monthlyTokenBudget: Number.MAX_SAFE_INTEGER,
        endUserDailyTokenBudget: 9,
        endUserBucket: { rps: 4, burst: 5 },
      });
    });
  });
});
