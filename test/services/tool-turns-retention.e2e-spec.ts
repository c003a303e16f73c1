import type { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { Clock, ManualClock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import { ToolTurnsRetentionWorker } from '../../src/tools/tool-turns-retention.worker';
import { freshToolState, ToolTurnsService } from '../../src/tools/tool-turns.service';
import { ToolsModule } from '../../src/tools/tools.module';
import { Factory } from '../support/factory';
import { createFreshDatabase, type FreshDatabase } from '../support/fresh-database';
import { moduleAlone } from '../support/module-alone';
import { engineReply, lookupOrderTool } from '../support/tools';

/**
 * ToolTurnsRetentionWorker, the tools module alone on a real database without HTTP ("medium"
 * spec): paused turns (contract §26) past TOOL_TURN_TTL_SECONDS are deleted whether or not
 * another turn is ever paused, and a turn another transaction holds is skipped, not waited for.
 * Turns are paused by ToolTurnsService.run, as a reply pauses them; time is a ManualClock's.
 */
describe('ToolTurnsRetentionWorker (real database)', () => {
  // On a database of its own: the purge deletes the expired turns of every organization, so the
  // counts below hold only where no other suite has left turns.
  const clock = new ManualClock(Date.parse('2031-07-01T09:00:00.000Z'));
  let database: FreshDatabase;
  let moduleRef: TestingModule;
  let db: Database;
  let turns: ToolTurnsService;
  let worker: ToolTurnsRetentionWorker;

  beforeAll(async () => {
    database = await createFreshDatabase('turn_purge', process.env.DATABASE_URL);
    moduleRef = await moduleAlone(
      [ToolsModule],
      { TOOL_TURN_TTL_SECONDS: '60', DATABASE_URL: database.url },
      (builder) => builder.overrideProvider(Clock).useValue(clock),
    );
    db = moduleRef.get(Database);
    turns = moduleRef.get(ToolTurnsService);
    worker = moduleRef.get(ToolTurnsRetentionWorker);
  });
  afterAll(async () => {
    await moduleRef?.close();
    await database?.drop();
  });

  const turnsLeft = async (ids: string[]) =>
    (
      await db.rows<{ id: string }>(
        sql`SELECT id FROM tool_turns WHERE id = ANY(${ids}::text[]) ORDER BY id`,
      )
    ).map((row) => row.id);

  it('deletes the turns past their expiry, skipping a locked one, and keeps the others resumable', async () => {
    const factory = new Factory(db);
    const organizationId = await factory.organization();
    const personalityId = await factory.personality(organizationId);
    const endUsers = new Map<string, string>();
    const context = async (userId: string, state = freshToolState(userId, 'Where is it?', [])) => ({
      organizationId,
      endUserId: endUsers.get(userId) ?? (await factory.endUser(organizationId, userId)),
      userId,
      personalityId,
      personalityTools: [lookupOrderTool],
      state,
      signal: new AbortController().signal,
      tokenSteps: () => [],
    });
    /** A turn paused on the engine's call of lookup_order. */
    const pause = async (userId: string) => {
      const turnContext = await context(userId);
      endUsers.set(userId, turnContext.endUserId);
      const paused = await turns.run(turnContext, async () =>
        engineReply('', [
          { id: 'call_1', name: 'lookup_order', arguments: { order_id: 'A-1042' } },
        ]),
      );
      if (paused.kind !== 'paused') throw new Error(`not paused: ${paused.kind}`);
      return { turnId: paused.turnId, callId: paused.toolCalls[0].id };
    };
    const expiring = (await Promise.all([pause('old-1'), pause('old-2'), pause('old-3')])).map(
      (turn) => turn.turnId,
    );
    clock.advance(45_000);
    const fresh = await pause('fresh');
    clock.advance(30_000); // the first three are 75 s old (TTL 60 s), the last 30 s

    // One expired turn is held by another transaction (an instance deleting it, or a resumption
    // claiming it): the purge skips it rather than wait, and takes it on a later run.
    const holder = new Client({ connectionString: database.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM tool_turns WHERE id = $1 FOR UPDATE', [expiring[0]]);
      expect(await worker.purgeExpired()).toBe(2);
      expect(await turnsLeft([...expiring, fresh.turnId])).toEqual(
        [expiring[0], fresh.turnId].sort(),
      );
      await holder.query('ROLLBACK');
    } finally {
      await holder.end();
    }
    expect(await worker.purgeExpired()).toBe(1);
    expect(await turnsLeft([...expiring, fresh.turnId])).toEqual([fresh.turnId]);

    // The fresh turn is resumed as a reply resumes it: checked, claimed, run to its answer.
    const outputs = [{ tool_call_id: fresh.callId, output: { ok: true } }];
    const { state, answered } = await turns.check(organizationId, fresh.turnId, outputs);
    await turns.claim(organizationId, fresh.turnId, answered);
    const asked: unknown[] = [];
    const resumed = await turns.run(await context('fresh', state), async (extra) => {
      asked.push(extra.toolResults);
      return engineReply('It has shipped.');
    });
    expect(resumed).toMatchObject({ kind: 'completed', reply: { text: 'It has shipped.' } });
    expect(asked).toEqual([
      [
        {
          call: { id: 'call_1', name: 'lookup_order', arguments: { order_id: 'A-1042' } },
          output: { ok: true },
        },
      ],
    ]);
  });
});
