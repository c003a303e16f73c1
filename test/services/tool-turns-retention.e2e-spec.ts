import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { Clock } from '../../src/common/time/clock';
import { ToolTurnsRetentionWorker } from '../../src/tools/tool-turns-retention.worker';
import { ShiftedClock } from '../support/clocks';
import { createFreshDatabase, type FreshDatabase } from '../support/fresh-database';
import { tenantWithKey } from '../support/identity';
import { createTestApp, type TestApp } from '../support/test-app';
import { lookupOrderTool } from '../support/tools';

/**
 * ToolTurnsRetentionWorker on the real database: paused turns (contract §26) past
 * TOOL_TURN_TTL_SECONDS are deleted whether or not another turn is ever paused, and a turn
 * another transaction holds is skipped, not waited for.
 */
describe('ToolTurnsRetentionWorker (real database)', () => {
  // On a database of its own: the purge deletes the expired turns of every organization, so the
  // counts below hold only where no other suite has left turns.
  const clock = new ShiftedClock();
  let database: FreshDatabase;
  let t: TestApp;
  let db: DataSource;

  beforeAll(async () => {
    database = await createFreshDatabase('turn_purge', process.env.DATABASE_URL);
    t = await createTestApp({
      env: { TOOL_TURN_TTL_SECONDS: '60', DATABASE_URL: database.url },
      override: (builder) => builder.overrideProvider(Clock).useValue(clock),
    });
    db = t.app.get(DataSource);
  });
  afterAll(async () => {
    await t?.close();
    await database?.drop();
  });
  afterEach(() => clock.reset());

  const turnsLeft = async (ids: string[]) =>
    (
      await db.query<Array<{ id: string }>>(
        'SELECT id FROM tool_turns WHERE id = ANY($1::text[]) ORDER BY id',
        [ids],
      )
    ).map((row) => row.id);

  it('deletes the turns past their expiry, skipping a locked one, and keeps the others resumable', async () => {
    const tenant = await tenantWithKey(t);
    const created = await t
      .http()
      .post('/v1/personalities/from-catalog')
      .set('Authorization', tenant.auth)
      .send({ slug: 'sage-mentor', tools: [lookupOrderTool] });
    const pause = async (userId: string) => {
      const paused = await t.http().post('/v1/respond').set('Authorization', tenant.auth).send({
        personality_id: created.body.id,
        user_id: userId,
        message: 'Where is it? lookup_order({"order_id": "A-1042"})',
      });
      expect(paused.body).toMatchObject({ status: 'requires_action' });
      return {
        turnId: paused.body.turn_id as string,
        callId: paused.body.tool_calls[0].id as string,
      };
    };
    const expiring = (await Promise.all([pause('old-1'), pause('old-2'), pause('old-3')])).map(
      (turn) => turn.turnId,
    );
    clock.advance(45_000);
    const fresh = await pause('fresh');
    clock.advance(30_000); // the first three are 75 s old (TTL 60 s), the last 30 s

    // One expired turn is held by another transaction (an instance deleting it, or a resumption
    // claiming it): the purge skips it rather than wait, and takes it on a later run.
    const worker = t.app.get(ToolTurnsRetentionWorker);
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

    const resumed = await t
      .http()
      .post(`/v1/respond/turns/${fresh.turnId}/tool-outputs`)
      .set('Authorization', tenant.auth)
      .send({ outputs: [{ tool_call_id: fresh.callId, output: { ok: true } }] });
    expect(resumed.body).toMatchObject({ status: 'completed' });
  });
});
