import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { PinoLogger } from 'nestjs-pino';
import type { EntityManager } from 'typeorm';
import { ErasureModule } from '../common/erasure/erasure.module';
import {
  type ErasedEndUser,
  ErasesEndUsers,
  ErasesEndUsersInParts,
  ErasureOrder,
} from '../common/erasure/erasure-participant';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock, ManualClock } from '../common/time/clock';
import { endUsersConfig } from '../config/end-users.config';
import { Database } from '../database/database';
import { MetricsService } from '../metrics/metrics.service';
import { type DueErasure, EndUsersRepository } from './end-users.repository';
import { ERASED_ROWS_PER_TRANSACTION, ErasureWorker } from './erasure.worker';

interface Call {
  participant: string;
  manager: EntityManager;
  endUsers: readonly ErasedEndUser[];
}

/** A provider, as a module would declare one, whose erasure method records its calls. */
function fakeParticipant(
  name: string,
  order: number,
  calls: Call[],
  failures: Map<string, Error>,
): new () => object {
  @Injectable()
  class FakeParticipant {
    @ErasesEndUsers({ order, tables: [] })
    erase(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
      calls.push({ participant: name, manager, endUsers });
      const failure = failures.get(name);
      return failure ? Promise.reject(failure) : Promise.resolve();
    }
  }
  // Participants are named `Class.method`: each fake class gets its own name.
  Object.defineProperty(FakeParticipant, 'name', { value: name });
  return FakeParticipant;
}

interface PartCall extends Call {
  rows: number;
}

/** An erasure in parts holding `left.get(name)` rows (none when unset), taking what it is let. */
function fakePart(name: string, calls: PartCall[], left: Map<string, number>): new () => object {
  @Injectable()
  class FakePart {
    @ErasesEndUsersInParts({ tables: [] })
    erase(
      manager: EntityManager,
      endUsers: readonly ErasedEndUser[],
      rows: number,
    ): Promise<number> {
      calls.push({ participant: name, manager, endUsers, rows });
      const deleted = Math.min(rows, left.get(name) ?? 0);
      left.set(name, (left.get(name) ?? 0) - deleted);
      return Promise.resolve(deleted);
    }
  }
  Object.defineProperty(FakePart, 'name', { value: name });
  return FakePart;
}

const due = (n: number, from = 0): DueErasure[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `id-${from + i}`,
    organization_id: 'org-1',
    user_id: `user-${from + i}`,
  }));

describe('ErasureWorker', () => {
  const clock = new ManualClock(Date.parse('2026-11-28T12:00:00Z'));
  let calls: Call[];
  let partCalls: PartCall[];
  let partRows: Map<string, number>;
  let failures: Map<string, Error>;
  /** What each claimDue answers, in turn; then nothing is due. */
  let batches: DueErasure[][];
  let transactions: Array<{ manager: EntityManager; options: unknown }>;
  let worker: ErasureWorker;

  beforeEach(async () => {
    calls = [];
    partCalls = [];
    partRows = new Map();
    failures = new Map();
    batches = [];
    transactions = [];
    const database = {
      // A failed transaction is rolled back by the real one; here the rejection just passes on.
      transaction: <T>(
        work: (manager: EntityManager) => Promise<T>,
        options: unknown,
      ): Promise<T> => {
        const manager = { transaction: transactions.length } as unknown as EntityManager;
        transactions.push({ manager, options });
        return work(manager);
      },
    };
    const endUsers = {
      claimDue: jest.fn((_manager: EntityManager, now: Date, limit: number) => {
        expect(now).toEqual(clock.now());
        return Promise.resolve((batches.shift() ?? []).slice(0, limit));
      }),
      countDeleting: jest.fn(),
    };
    const logger = { setContext: jest.fn(), info: jest.fn(), warn: jest.fn(), error: jest.fn() };
    const moduleRef = await Test.createTestingModule({
      imports: [ErasureModule],
      providers: [
        ErasureWorker,
        // Declared out of order: the order is the participants' own.
        fakeParticipant('notices', ErasureOrder.NOTICES, calls, failures),
        fakeParticipant('end-users', ErasureOrder.END_USERS, calls, failures),
        fakeParticipant('data-b', ErasureOrder.DATA, calls, failures),
        fakeParticipant('redactions', ErasureOrder.REDACTIONS, calls, failures),
        fakeParticipant('data-a', ErasureOrder.DATA, calls, failures),
        fakeParticipant('referrers', ErasureOrder.REFERRERS, calls, failures),
        fakePart('part-b', partCalls, partRows),
        fakePart('part-a', partCalls, partRows),
        { provide: Database, useValue: database },
        { provide: EndUsersRepository, useValue: endUsers },
        { provide: endUsersConfig.KEY, useValue: { erasurePollIntervalMs: 1_000 } },
        { provide: Clock, useValue: clock },
        { provide: PinoLogger, useValue: logger },
        { provide: MetricsService, useValue: { gauge: jest.fn() } },
        { provide: BackgroundJobs, useValue: new BackgroundJobs('command') },
      ],
    }).compile();
    await moduleRef.init();
    worker = moduleRef.get(ErasureWorker);
  });

  it('runs every participant in order (then by name), in the transaction, on the claimed users', async () => {
    batches = [due(2)];

    await expect(worker.eraseDue()).resolves.toBe(2);

    expect(calls.map((call) => call.participant)).toEqual([
      'referrers',
      'data-a',
      'data-b',
      'redactions',
      'end-users',
      'notices',
    ]);
    expect(transactions).toHaveLength(1);
    // No request waits for it; a reply storing its exchange may deadlock with it (run again).
    expect(transactions[0].options).toEqual({ statementTimeoutMs: 0, deadlockAttempts: 3 });
    for (const call of calls) {
      expect(call.manager).toBe(transactions[0].manager);
      expect(call.endUsers).toEqual([
        { id: 'id-0', organizationId: 'org-1', userId: 'user-0' },
        { id: 'id-1', organizationId: 'org-1', userId: 'user-1' },
      ]);
    }
  });

  it('erases in batches of 20, one transaction each, until a batch comes back short', async () => {
    batches = [due(20), due(20, 20), due(3, 40)];

    await expect(worker.eraseDue()).resolves.toBe(43);

    expect(transactions).toHaveLength(3);
    expect(calls.filter((call) => call.participant === 'end-users')).toHaveLength(3);
  });

  it('calls no participant when nobody is due', async () => {
    await expect(worker.eraseDue()).resolves.toBe(0);

    expect(calls).toEqual([]);
    expect(transactions).toHaveLength(1);
  });

  it('a failing participant stops the batch: the later ones do not run and the run fails', async () => {
    const failure = new Error('redaction failed');
    failures.set('redactions', failure);
    // The failed transaction rolled back, so the next run claims the same users again.
    batches = [due(2), due(2)];

    await expect(worker.eraseDue()).rejects.toBe(failure);
    expect(calls.map((call) => call.participant)).toEqual([
      'referrers',
      'data-a',
      'data-b',
      'redactions',
    ]);

    failures.clear();
    calls.length = 0;
    await expect(worker.eraseDue()).resolves.toBe(2);
    expect(calls.map((call) => call.participant)).toHaveLength(6);
    expect(calls[0].endUsers.map((endUser) => endUser.id)).toEqual(['id-0', 'id-1']);
  });

  it('erases in parts first: a transaction whose parts take their rows ends there, and the rest runs once they come back short', async () => {
    partRows.set('part-a', ERASED_ROWS_PER_TRANSACTION + 2_000);
    partRows.set('part-b', 2_000);
    // The first transaction commits only part-a's rows, so the same users are claimed again.
    batches = [due(2), due(2)];

    await expect(worker.eraseDue()).resolves.toBe(2);

    expect(transactions).toHaveLength(2);
    expect(
      partCalls.map(({ participant, manager, rows }) => ({
        participant,
        transaction: transactions.findIndex((t) => t.manager === manager),
        rows,
      })),
    ).toEqual([
      { participant: 'part-a', transaction: 0, rows: ERASED_ROWS_PER_TRANSACTION },
      { participant: 'part-a', transaction: 1, rows: ERASED_ROWS_PER_TRANSACTION },
      { participant: 'part-b', transaction: 1, rows: ERASED_ROWS_PER_TRANSACTION - 2_000 },
    ]);
    expect(partRows).toEqual(
      new Map([
        ['part-a', 0],
        ['part-b', 0],
      ]),
    );
    // The other participants ran once, in the second transaction, after the parts.
    expect(calls.map((call) => call.participant)).toHaveLength(6);
    for (const call of calls) expect(call.manager).toBe(transactions[1].manager);
  });

  it('goes on after a transaction of parts alone, even when it claimed fewer than a batch', async () => {
    partRows.set('part-a', 3 * ERASED_ROWS_PER_TRANSACTION);
    batches = [due(1), due(1), due(1), due(1)];

    await expect(worker.eraseDue()).resolves.toBe(1);

    expect(transactions).toHaveLength(4);
    expect(calls.filter((call) => call.participant === 'end-users')).toHaveLength(1);
  });
});
