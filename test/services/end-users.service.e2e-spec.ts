import { randomUUID } from 'node:crypto';
import type { TestingModule } from '@nestjs/testing';
import type { ApiKeyCaller } from '../../src/common/auth/caller';
import { AppError } from '../../src/common/errors/app-error';
import { Clock, ManualClock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import { EndUsersModule } from '../../src/end-users/end-users.module';
import { EndUsersRepository } from '../../src/end-users/end-users.repository';
import { EndUsersService } from '../../src/end-users/end-users.service';
import { ErasureWorker } from '../../src/end-users/erasure.worker';
import { uniqueUserId } from '../support/data-plane';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';

const GRACE_SECONDS = 30;
const POLL_MS = 3_600_000;

/**
 * The end-users module alone on a real PostgreSQL, without HTTP (a "medium" spec): EndUsersService
 * and the erasure worker called directly, with a clock the spec moves instead of sleeping (the
 * module's Clock answers a ManualClock). The worker never polls on its own (no background job runs
 * in a module built alone, and its interval is an hour anyway); the spec drives it. What it erases
 * is up to the participants in the module and its imports, among them the end_users row
 * (EndUsersRepository) and the audit events' redaction (AuditService) this spec checks; the
 * other modules' participants are test/erasure-coverage.e2e-spec.ts's. Organizations are written
 * by Factory.
 */
describe('EndUsersService (database)', () => {
  let moduleRef: TestingModule;
  let endUsers: EndUsersService;
  let worker: ErasureWorker;
  let database: Database;
  let factory: Factory;
  let organizationId: string;
  const clock = new ManualClock();

  beforeAll(async () => {
    moduleRef = await moduleAlone(
      [EndUsersModule],
      {
        REDIS_URL: undefined,
        ERASURE_GRACE_SECONDS: String(GRACE_SECONDS),
        ERASURE_POLL_INTERVAL_MS: String(POLL_MS),
      },
      (builder) => builder.overrideProvider(Clock).useValue(clock),
    );
    endUsers = moduleRef.get(EndUsersService);
    worker = moduleRef.get(ErasureWorker);
    database = moduleRef.get(Database);
    factory = new Factory(database);
    organizationId = await factory.organization();
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  const caller = (): ApiKeyCaller => ({
    kind: 'api_key',
    organizationId,
    apiKeyId: randomUUID(),
    scopes: ['read_write'],
  });

  const rejection = async (promise: Promise<unknown>): Promise<AppError> => {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  };

  describe('ensure (create-or-get)', () => {
    it('creates once, then answers the same row and ignores the new metadata', async () => {
      const userId = uniqueUserId();
      const first = await endUsers.ensure(organizationId, userId, { plan: 'pro' });
      expect(first.created).toBe(true);
      expect(first.row).toMatchObject({
        user_id: userId,
        metadata: { plan: 'pro' },
        status: 'active',
      });

      const again = await endUsers.ensure(organizationId, userId, { plan: 'free' });
      expect(again.created).toBe(false);
      expect(again.row.id).toBe(first.row.id);
      expect(again.row.metadata).toEqual({ plan: 'pro' });
    });

    it('defaults the metadata to {}', async () => {
      const { row } = await endUsers.ensure(organizationId, uniqueUserId());
      expect(row.metadata).toEqual({});
    });

    it('of concurrent creates of one user_id, exactly one creates and all answer the same row', async () => {
      const userId = uniqueUserId('race');
      const results = await Promise.all(
        Array.from({ length: 24 }, (_, i) => endUsers.ensure(organizationId, userId, { i })),
      );
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(new Set(results.map((r) => r.row.id)).size).toBe(1);
      const [{ n }] = await database.rows<{ n: number }>(
        sql`SELECT count(*)::int AS n FROM end_users
             WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
      );
      expect(n).toBe(1);
    });

    it('keeps user_ids of different organizations apart', async () => {
      const other = await factory.organization();
      const userId = uniqueUserId('shared');
      const mine = await endUsers.ensure(organizationId, userId);
      const theirs = await endUsers.ensure(other, userId);
      expect(theirs.created).toBe(true);
      expect(theirs.row.id).not.toBe(mine.row.id);
    });
  });

  describe('erasure scheduling', () => {
    it('schedules after the grace period of the clock, keeps the first schedule, refuses the user meanwhile', async () => {
      const userId = uniqueUserId('erase');
      await endUsers.ensure(organizationId, userId);
      const scheduledAt = clock.nowMs();
      const expected = new Date(scheduledAt + GRACE_SECONDS * 1000 + POLL_MS).toISOString();

      const deletion = await endUsers.scheduleErasure(caller(), userId);
      expect(deletion).toEqual({
        user_id: userId,
        status: 'deleting',
        erasure_expected_at: expected,
      });

      // A later DELETE keeps the first schedule and is not audited again.
      clock.advance(10_000);
      expect(await endUsers.scheduleErasure(caller(), userId)).toEqual(deletion);
      const events = await database.rows(
        sql`SELECT details FROM audit_events
             WHERE organization_id = ${organizationId} AND action = 'end_user.deleted'
               AND target_id = ${userId}`,
      );
      expect(events).toEqual([
        { details: { erase_after: new Date(scheduledAt + GRACE_SECONDS * 1000).toISOString() } },
      ]);

      const refused = await rejection(endUsers.ensure(organizationId, userId));
      expect(refused.code).toBe('end_user_under_deletion');
      expect(refused.extra).toEqual({ erasure_expected_at: expected });
      const update = await rejection(endUsers.updateMetadata(organizationId, userId, { a: 1 }));
      expect(update.code).toBe('end_user_under_deletion');
      expect((await endUsers.get(organizationId, userId)).status).toBe('deleting');
    });

    it('the worker erases the user only once the grace period is over, and the user_id is free again', async () => {
      const userId = uniqueUserId('due');
      await endUsers.ensure(organizationId, userId, { plan: 'pro' });
      await endUsers.scheduleErasure(caller(), userId);

      /** Audit events that still name the end user by its user_id. */
      const naming = async () => {
        const [{ n }] = await database.rows<{ n: number }>(
          sql`SELECT count(*)::int AS n FROM audit_events
               WHERE organization_id = ${organizationId} AND target_type = 'end_user'
                 AND target_id = ${userId}`,
        );
        return n;
      };

      clock.advance(GRACE_SECONDS * 1000 - 1);
      await worker.eraseDue();
      expect((await endUsers.get(organizationId, userId)).status).toBe('deleting');
      // The end_user.deleted event, which the erasure must redact.
      expect(await naming()).toBe(1);

      clock.advance(1);
      expect(await worker.eraseDue()).toBeGreaterThanOrEqual(1);
      expect((await rejection(endUsers.get(organizationId, userId))).code).toBe('not_found');
      expect(await naming()).toBe(0);

      const fresh = await endUsers.ensure(organizationId, userId);
      expect(fresh.created).toBe(true);
      expect(fresh.row.metadata).toEqual({});
    });

    it('claims organizations in turns, and skips what another instance holds', async () => {
      const repository = moduleRef.get(EndUsersRepository);
      // Due in 2001, long before anything else of this database: no other spec's user is due.
      const dueAt = (second: number) => new Date(Date.UTC(2001, 0, 1, 0, 0, second));
      const scheduled = async (organization: string, second: number) => {
        const id = await factory.endUser(organization, uniqueUserId('claim'));
        await database.count(
          sql`UPDATE end_users SET status = 'deleting', erase_after = ${dueAt(second)}
               WHERE id = ${id}`,
        );
        return id;
      };
      const busy = await factory.organization();
      const quiet = await factory.organization();
      const busyIds: string[] = [];
      for (let second = 0; second < 30; second++) busyIds.push(await scheduled(busy, second));
      // Due after all thirty of the busy organization's.
      const quietId = await scheduled(quiet, 40);
      const now = dueAt(50);

      await database.transaction(async (first) => {
        const claimed = (await repository.claimDue(first, now, 20)).map((row) => row.id);
        // Each organization's longest-due first (in the order the claim visits them), then the rest.
        expect(claimed.slice(0, 2).sort()).toEqual([busyIds[0], quietId].sort());
        expect(claimed.slice(2)).toEqual(busyIds.slice(1, 19));
        // Another instance, meanwhile: what is left, none of what the first holds.
        await database.transaction(async (second) => {
          const rest = await repository.claimDue(second, now, 20);
          expect(rest.map((row) => row.id)).toEqual(busyIds.slice(19));
        });
      });
      // The next claim starts after the organization the last one ended with, wrapping around.
      const [low, high] = [busy, quiet].sort();
      const oldestOf: Record<string, string> = { [busy]: busyIds[0], [quiet]: quietId };
      for (const [after, expected] of [
        [low, oldestOf[high]],
        [high, oldestOf[low]],
      ]) {
        await database.transaction(async (manager) => {
          const claimed = await repository.claimDue(manager, now, 1, after);
          expect(claimed.map((row) => row.id)).toEqual([expected]);
        });
      }
      await database.count(sql`DELETE FROM end_users WHERE organization_id IN (${busy}, ${quiet})`);
    });

    it('404 for an unknown user, without an audit event', async () => {
      const userId = uniqueUserId('unknown');
      expect((await rejection(endUsers.scheduleErasure(caller(), userId))).code).toBe('not_found');
      const events = await database.rows(
        sql`SELECT 1 FROM audit_events WHERE action = 'end_user.deleted' AND target_id = ${userId}`,
      );
      expect(events).toEqual([]);
    });
  });
});
