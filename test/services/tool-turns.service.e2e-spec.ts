import type { TestingModule } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { Clock, ManualClock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { raw, type Sql, sql } from '../../src/database/sql';
import type { EngineReply, TokenUsage } from '../../src/respond/engine/response-engine';
import type { ToolTurnState } from '../../src/tools/tool-turn-state';
import {
  type AskEngine,
  freshToolState,
  type ToolTurnContext,
  ToolTurnsService,
} from '../../src/tools/tool-turns.service';
import { toolSchemas } from '../../src/tools/tool-schemas';
import { ToolsModule } from '../../src/tools/tools.module';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';
import { engineReply, lookupOrderTool } from '../support/tools';

const TTL_SECONDS = 60;
const MAX_ROUNDS = 2;
const PENDING_PER_ORG = 3;
/** A client's output, serialised, at most this many bytes (a webhook tool's bound). */
const MAX_OUTPUT_BYTES = 16 * 1024;

const call = (id: string, args: unknown = { order_id: 'A-1042' }, name = 'lookup_order') => ({
  id,
  name,
  arguments: args,
});

/**
 * The tools module alone on a real PostgreSQL, without HTTP ("medium" spec): ToolTurnsService's
 * paused turns (contract §26), as a reply uses them: `run` pauses a turn for the client's calls,
 * `check` takes the client's outputs, `claim` takes the turn for one resumption, `release` gives
 * it back. Expiry is the Clock's (a ManualClock), not the database's; the engine is a function
 * of the spec; organizations, personalities and end users are written by Factory.
 */
describe('ToolTurnsService (real database)', () => {
  const clock = new ManualClock(Date.parse('2031-08-01T10:00:00.000Z'));
  let moduleRef: TestingModule;
  let turns: ToolTurnsService;
  let database: Database;
  let factory: Factory;

  beforeAll(async () => {
    moduleRef = await moduleAlone(
      [ToolsModule],
      {
        TOOL_TURN_TTL_SECONDS: String(TTL_SECONDS),
        TOOL_MAX_ROUNDS: String(MAX_ROUNDS),
        TOOL_TURNS_PENDING_PER_ORG: String(PENDING_PER_ORG),
      },
      (builder) => builder.overrideProvider(Clock).useValue(clock),
    );
    turns = moduleRef.get(ToolTurnsService);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterAll(() => moduleRef?.close());

  interface Tenant {
    organizationId: string;
    personalityId: string;
    endUserId: string;
    userId: string;
  }

  /** An organization with a personality and one end user. */
  async function tenant(): Promise<Tenant> {
    const organizationId = await factory.organization();
    const userId = `user-${randomUUID()}`;
    return {
      organizationId,
      personalityId: await factory.personality(organizationId),
      endUserId: await factory.endUser(organizationId, userId),
      userId,
    };
  }

  /** The turn's context as a reply gives it; `tokenSteps` counts into token_usage_months. */
  function contextOf(
    of: Tenant,
    state: ToolTurnState = freshToolState(of.userId, 'Where is my order?', []),
    tokenSteps: ToolTurnContext['tokenSteps'] = (usage) => [counted(of.organizationId, usage)],
  ): ToolTurnContext {
    return {
      organizationId: of.organizationId,
      endUserId: of.endUserId,
      userId: of.userId,
      personalityId: of.personalityId,
      personalityTools: [lookupOrderTool],
      state,
      signal: new AbortController().signal,
      tokenSteps,
    };
  }

  /** A WITH entry adding tokens to the organization's month, as a reply's steps count them. */
  function counted(organizationId: string, usage: TokenUsage, name = 'counted'): Sql {
    return sql`${raw(name)} AS (
      INSERT INTO token_usage_months (organization_id, month, requests, prompt_tokens,
                                      completion_tokens, cached_tokens)
      VALUES (${organizationId}, '2031-08-01', 1, ${usage.promptTokens}, ${usage.completionTokens}, 0)
      ON CONFLICT (organization_id, month) DO UPDATE
        SET requests = token_usage_months.requests + 1,
            prompt_tokens = token_usage_months.prompt_tokens + excluded.prompt_tokens,
            completion_tokens = token_usage_months.completion_tokens + excluded.completion_tokens
      RETURNING 1)`;
  }

  async function tokensOf(organizationId: string) {
    return database.rows<{ requests: string; prompt_tokens: string; completion_tokens: string }>(
      sql`SELECT requests, prompt_tokens, completion_tokens FROM token_usage_months
           WHERE organization_id = ${organizationId}`,
    );
  }

  async function turnRow(turnId: string) {
    return database.row<{ status: string; expires_at: Date; state: ToolTurnState }>(
      sql`SELECT status, expires_at, state FROM tool_turns WHERE id = ${turnId}`,
    );
  }

  /** A turn of `of` paused on the engine's call of lookup_order (`call_1`). */
  async function paused(of: Tenant): Promise<string> {
    const outcome = await turns.run(contextOf(of), async () => engineReply('', [call('call_1')]));
    if (outcome.kind !== 'paused') throw new Error('the turn did not pause');
    return outcome.turnId;
  }

  const shipped = [{ tool_call_id: 'call_1', output: { status: 'shipped' } }];
  /** The pause `paused` makes: call_1 pending after one round. */
  const FIRST_PAUSE = { pending: ['call_1'], rounds: 1 };

  it("checks a request's tools and a call's arguments in the turn of the organization's account", async () => {
    const of = await tenant();
    const [{ id: maker }] = await database.rows<{ id: string }>(
      sql`INSERT INTO users (email, password_hash)
          VALUES (${`maker-${randomUUID()}@example.test`}, 'not-a-hash') RETURNING id`,
    );
    await database.rows(
      sql`UPDATE organizations SET created_by_user_id = ${maker} WHERE id = ${of.organizationId}`,
    );
    const tenantOf = { organizationId: of.organizationId, account: maker };
    const checked = jest.spyOn(toolSchemas, 'problemOf');
    const validated = jest.spyOn(toolSchemas, 'validate');
    try {
      const { description, parameters } = lookupOrderTool;
      await turns.requestTools(of.organizationId, [
        { name: 'find_order', description, parameters },
      ]);
      expect(checked).toHaveBeenCalledWith(tenantOf, lookupOrderTool.parameters);
      await paused(of);
      expect(validated).toHaveBeenCalledWith(tenantOf, lookupOrderTool.parameters, {
        order_id: 'A-1042',
      });
    } finally {
      checked.mockRestore();
      validated.mockRestore();
    }
  });

  it("sends a round's checks of arguments together: one job of another tenant's is waited for, not one per call (review)", async () => {
    const of = await tenant();
    const validate = toolSchemas.validate.bind(toolSchemas);
    let inFlight = 0;
    let most = 0;
    const validated = jest.spyOn(toolSchemas, 'validate').mockImplementation(async (...args) => {
      most = Math.max(most, (inFlight += 1));
      try {
        return await validate(...args);
      } finally {
        inFlight -= 1;
      }
    });
    try {
      const calls = [1, 2, 3, 4, 5, 6, 7, 8].map((n) => call(`call_${n}`, { order_id: `A-${n}` }));
      const outcome = await turns.run(contextOf(of), async () => engineReply('', calls));
      expect(outcome.kind).toBe('paused');
      expect(validated).toHaveBeenCalledTimes(8);
      // Before, each waited for the one before it: another tenant's job ran between each two.
      expect(most).toBe(8);
    } finally {
      validated.mockRestore();
    }
  });

  it('offers no tool for a message of crisis: the reply and its crisis lines come now (review)', async () => {
    const of = await tenant();
    const offered: unknown[] = [];
    const outcome = await turns.run({ ...contextOf(of), crisis: true }, async ({ tools }) => {
      offered.push(tools);
      // A model that calls a tool whatever it is offered: the call is not made.
      return engineReply('I am here with you.', [call('call_1')]);
    });
    expect(offered).toEqual([undefined]);
    expect(outcome.kind).toBe('completed');
  });

  it('keeps at most TOOL_TURNS_PENDING_PER_ORG turns of an organization paused: the oldest end (review)', async () => {
    const of = await tenant();
    const other = await tenant();
    const otherTurn = await paused(other);
    const made: string[] = [];
    const started = clock.now();
    for (let i = 0; i < PENDING_PER_ORG + 2; i++) {
      made.push(await paused(of));
      // Each pause a millisecond after the one before: they are told apart by their expiry.
      clock.advance(1);
    }
    // The two oldest ended as expired, their state emptied: a resumption finds no turn.
    for (const ended of made.slice(0, 2)) {
      expect(await turnRow(ended)).toMatchObject({ status: 'pending', state: null });
      await expectAppError(turns.check(of.organizationId, ended, shipped), 'not_found');
    }
    for (const kept of made.slice(2)) {
      const checked = await turns.check(of.organizationId, kept, shipped);
      expect(checked.answered).toEqual(FIRST_PAUSE);
    }
    // Another organization's pauses are its own.
    expect((await turns.check(other.organizationId, otherTurn, shipped)).answered).toEqual(
      FIRST_PAUSE,
    );
    clock.set(started);
  });

  it('keeps the bound when an organization pauses many turns at once (review)', async () => {
    const of = await tenant();
    const made = await Promise.all(Array.from({ length: PENDING_PER_ORG * 3 }, () => paused(of)));
    const [{ held }] = await database.rows<{ held: number }>(
      sql`SELECT count(*)::int AS held FROM tool_turns
           WHERE organization_id = ${of.organizationId} AND status = 'pending'
             AND state IS NOT NULL AND expires_at > ${clock.now()}`,
    );
    expect({ made: made.length, held }).toEqual({
      made: PENDING_PER_ORG * 3,
      held: PENDING_PER_ORG,
    });
  });

  it('pauses for client calls until the TTL by the clock, counting its tokens with the pause', async () => {
    const of = await tenant();
    const usage = { promptTokens: 120, completionTokens: 30, cachedTokens: 0 };
    const outcome = await turns.run(contextOf(of), async () =>
      engineReply(
        '',
        [call('call_1'), call('call_2', { order_id: 42 }), call('call_3', {}, 'no_such_tool')],
        usage,
      ),
    );
    // Only the valid client call goes to the client; the others have their error outputs.
    expect(outcome).toEqual({
      kind: 'paused',
      turnId: expect.stringMatching(/^turn_[0-9A-HJKMNP-TV-Z]{26}$/),
      toolCalls: [call('call_1')],
    });
    const turnId = (outcome as { turnId: string }).turnId;
    const row = await turnRow(turnId);
    expect(row).toMatchObject({ status: 'pending', state: { pending: ['call_1'], usage: null } });
    expect(row?.expires_at.toISOString()).toBe('2031-08-01T10:01:00.000Z');
    expect(row?.state.round.outputs).toEqual({
      call_2: {
        error: "the arguments do not match the tool's schema: /order_id must be string",
      },
      call_3: { error: 'no such tool' },
    });
    // Counted once, with the pause: the saved turn carries none of them.
    expect(await tokensOf(of.organizationId)).toEqual([
      { requests: '1', prompt_tokens: '120', completion_tokens: '30' },
    ]);
  });

  it('saves nothing when the tokens of the pause cannot be counted: one statement', async () => {
    const of = await tenant();
    const state = freshToolState(of.userId, 'Where is my order?', []);
    // The count fails (an organization that does not exist): the pause fails with it.
    const failing = contextOf(of, state, (usage) => [counted(randomUUID(), usage)]);
    const usage = { promptTokens: 1, completionTokens: 1, cachedTokens: 0 };
    await expect(
      turns.run(failing, async () => engineReply('', [call('call_1')], usage)),
    ).rejects.toThrow(/foreign key/);
    expect(await turnRow(state.turnId)).toBeUndefined();
  });

  it('resumes with the outputs of every call of the round, in the order the engine made them', async () => {
    const of = await tenant();
    const first = await turns.run(contextOf(of), async () =>
      engineReply('', [
        call('call_1'),
        call('call_2', { order_id: 42 }),
        call('call_3', { order_id: 'B-7' }),
      ]),
    );
    expect(first).toMatchObject({
      kind: 'paused',
      toolCalls: [call('call_1'), call('call_3', { order_id: 'B-7' })],
    });
    const turnId = (first as { turnId: string }).turnId;
    const outputs = [
      { tool_call_id: 'call_3', output: 'late' },
      { tool_call_id: 'call_1', output: { status: 'shipped' } },
    ];
    const { personalityId, state, answered } = await turns.check(
      of.organizationId,
      turnId,
      outputs,
    );
    expect(personalityId).toBe(of.personalityId);
    expect(state).toMatchObject({ userId: of.userId, message: 'Where is my order?', pending: [] });
    expect(answered).toEqual({ pending: ['call_1', 'call_3'], rounds: 1 });
    await turns.claim(of.organizationId, turnId, answered);

    const asked: Array<Omit<Parameters<AskEngine>[0], 'onUncountedSpend'>> = [];
    const done = await turns.run(contextOf(of, state), async (extra) => {
      // Each call is told where a streamed call's uncounted tokens go (the turn's usage).
      const { onUncountedSpend, ...request } = extra;
      expect(onUncountedSpend).toEqual(expect.any(Function));
      asked.push(request);
      return engineReply('It has shipped.');
    });
    const invalid = {
      error: "the arguments do not match the tool's schema: /order_id must be string",
    };
    expect(asked).toEqual([
      {
        tools: [
          {
            name: 'lookup_order',
            description: lookupOrderTool.description,
            parameters: lookupOrderTool.parameters,
          },
        ],
        toolResults: [
          { call: call('call_1'), output: { status: 'shipped' } },
          { call: call('call_2', { order_id: 42 }), output: invalid },
          { call: call('call_3', { order_id: 'B-7' }), output: 'late' },
        ],
      },
    ]);
    expect(done).toMatchObject({ kind: 'completed', reply: { text: 'It has shipped.' } });
    expect(
      (
        done as { toolCalls: Array<{ id: string; output: unknown; error: string | null }> }
      ).toolCalls.map(({ id, output, error }) => ({ id, output, error })),
    ).toEqual([
      { id: 'call_2', output: invalid, error: invalid.error },
      { id: 'call_1', output: { status: 'shipped' }, error: null },
      { id: 'call_3', output: 'late', error: null },
    ]);
  });

  it('refuses outputs unless each pending call has exactly one, within the bound, and claims nothing', async () => {
    const of = await tenant();
    const turnId = await paused(of);
    const refusal = async (outputs: Array<{ tool_call_id: string; output: unknown }>) => {
      const error = await turns.check(of.organizationId, turnId, outputs).then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(error).toMatchObject({ code: 'validation_failed' });
      return (error as { details: unknown }).details;
    };
    expect(await refusal([{ tool_call_id: 'call_other', output: 1 }])).toEqual([
      {
        field: 'outputs.0.tool_call_id',
        problem: 'must be the id of a pending tool call of this turn',
      },
      { field: 'outputs', problem: 'lacks the output of call_1' },
    ]);
    expect(
      await refusal([
        { tool_call_id: 'call_1', output: 1 },
        { tool_call_id: 'call_1', output: 2 },
      ]),
    ).toEqual([
      { field: 'outputs.1.tool_call_id', problem: 'must not repeat: each call takes one output' },
    ]);
    expect(await refusal([])).toEqual([
      { field: 'outputs', problem: 'lacks the output of call_1' },
    ]);
    // 16 KiB serialised is the bound: a string of 16,382 characters and its two quotes fit.
    expect(
      await refusal([{ tool_call_id: 'call_1', output: 'x'.repeat(MAX_OUTPUT_BYTES - 1) }]),
    ).toEqual([{ field: 'outputs.0.output', problem: 'must be at most 16384 bytes serialised' }]);
    const fits = [{ tool_call_id: 'call_1', output: 'x'.repeat(MAX_OUTPUT_BYTES - 2) }];
    await turns.check(of.organizationId, turnId, fits);

    // Nothing was claimed, by the refusals nor by the check that passed.
    expect(await turnRow(turnId)).toMatchObject({
      status: 'pending',
      state: { pending: ['call_1'] },
    });
    await turns.claim(of.organizationId, turnId, FIRST_PAUSE);
  });

  it("answers 404 for an unknown turn, another organization's, and one expired by the clock", async () => {
    const of = await tenant();
    const turnId = await paused(of);
    const other = await tenant();
    await expectAppError(turns.check(other.organizationId, turnId, shipped), 'not_found');
    await expectAppError(
      turns.claim(other.organizationId, turnId, FIRST_PAUSE),
      'turn_not_pending',
    );
    await expectAppError(
      turns.check(of.organizationId, `turn_${'0'.repeat(26)}`, shipped),
      'not_found',
    );

    // A millisecond before its expiry (TTL 60 s) the turn is pending; at its expiry it is gone,
    // though no purge has deleted its row: the claim of a check just before refuses too.
    clock.advance(TTL_SECONDS * 1000 - 1);
    await turns.check(of.organizationId, turnId, shipped);
    clock.advance(1);
    await expectAppError(turns.check(of.organizationId, turnId, shipped), 'not_found');
    await expectAppError(turns.claim(of.organizationId, turnId, FIRST_PAUSE), 'turn_not_pending');
    expect(await turnRow(turnId)).toMatchObject({ status: 'pending' });
  });

  it('lets exactly one of concurrent claims take the turn; then it is not pending', async () => {
    const of = await tenant();
    const turnId = await paused(of);
    const claims = await Promise.allSettled(
      Array.from({ length: 8 }, () => turns.claim(of.organizationId, turnId, FIRST_PAUSE)),
    );
    expect(claims.filter((claim) => claim.status === 'fulfilled')).toHaveLength(1);
    for (const claim of claims) {
      if (claim.status === 'rejected') {
        expect(claim.reason).toMatchObject({ code: 'turn_not_pending' });
      }
    }
    expect(await turnRow(turnId)).toMatchObject({ status: 'resumed' });
    // Resumed: 409, not 404, for the outputs sent again.
    await expectAppError(turns.check(of.organizationId, turnId, shipped), 'turn_not_pending');
  });

  it('gives a claimed turn back for one more claim, counting tokens with it; only to its organization', async () => {
    const of = await tenant();
    const turnId = await paused(of);
    await turns.claim(of.organizationId, turnId, FIRST_PAUSE);
    const other = await tenant();
    await turns.release(other.organizationId, turnId);
    await expectAppError(turns.check(of.organizationId, turnId, shipped), 'turn_not_pending');

    const spent = { promptTokens: 50, completionTokens: 5, cachedTokens: 0 };
    await turns.release(of.organizationId, turnId, [counted(of.organizationId, spent)]);
    expect(await tokensOf(of.organizationId)).toEqual([
      { requests: '1', prompt_tokens: '50', completion_tokens: '5' },
    ]);
    await turns.check(of.organizationId, turnId, shipped);
    const again = await Promise.allSettled(
      Array.from({ length: 4 }, () => turns.claim(of.organizationId, turnId, FIRST_PAUSE)),
    );
    expect(again.map((claim) => claim.status).sort()).toEqual([
      'fulfilled',
      'rejected',
      'rejected',
      'rejected',
    ]);
    // Released past its expiry, the turn is pending but cannot be resumed.
    await turns.release(of.organizationId, turnId);
    clock.advance(TTL_SECONDS * 1000);
    await expectAppError(turns.check(of.organizationId, turnId, shipped), 'not_found');
    await expectAppError(turns.claim(of.organizationId, turnId, FIRST_PAUSE), 'turn_not_pending');
  });

  it('pauses a resumed turn again under its id, pending until a new expiry, for its new calls only', async () => {
    const of = await tenant();
    const turnId = await paused(of);
    const { state, answered } = await turns.check(of.organizationId, turnId, shipped);
    // Another resumption checks the turn as it stands too, and claims only once it is paused again.
    const late = await turns.check(of.organizationId, turnId, shipped);
    await turns.claim(of.organizationId, turnId, answered);
    clock.advance(40_000);
    const again = await turns.run(contextOf(of, state), async () =>
      engineReply('', [call('call_9', { order_id: 'C-3' })]),
    );
    expect(again).toEqual({
      kind: 'paused',
      turnId,
      toolCalls: [call('call_9', { order_id: 'C-3' })],
    });
    const row = await turnRow(turnId);
    expect(row).toMatchObject({ status: 'pending', state: { pending: ['call_9'], rounds: 2 } });
    expect(row?.expires_at.getTime()).toBe(clock.nowMs() + TTL_SECONDS * 1000);
    // Pending again, for call_9: the late claim, for call_1, would run the turn again from before.
    await expectAppError(turns.claim(of.organizationId, turnId, late.answered), 'turn_not_pending');
    expect(await turnRow(turnId)).toMatchObject({ status: 'pending' });
    await expectAppError(turns.check(of.organizationId, turnId, shipped), 'validation_failed');
    const resumed = await turns.check(of.organizationId, turnId, [
      { tool_call_id: 'call_9', output: 1 },
    ]);
    expect(resumed.answered).toEqual({ pending: ['call_9'], rounds: 2 });
    await turns.claim(of.organizationId, turnId, resumed.answered);
  });

  it('refuses a late claim when the provider used the same call id again in the next pause', async () => {
    const of = await tenant();
    const turnId = await paused(of);
    const { state, answered } = await turns.check(of.organizationId, turnId, shipped);
    const late = await turns.check(of.organizationId, turnId, shipped);
    await turns.claim(of.organizationId, turnId, answered);
    // Some OpenAI-compatible servers number calls per message: call_1 again, a round on.
    await turns.run(contextOf(of, state), async () => engineReply('', [call('call_1')]));
    expect(await turnRow(turnId)).toMatchObject({
      status: 'pending',
      state: { pending: ['call_1'], rounds: 2 },
    });
    await expectAppError(turns.claim(of.organizationId, turnId, late.answered), 'turn_not_pending');
  });

  it('asks without tools after TOOL_MAX_ROUNDS rounds, adding up the tokens of every call', async () => {
    const of = await tenant();
    const offered: boolean[] = [];
    const usage = { promptTokens: 10, completionTokens: 2, cachedTokens: 1 };
    // The engine keeps calling with arguments that fail the schema: each round goes back to it.
    const outcome = await turns.run(contextOf(of), async (extra) => {
      offered.push(extra.tools !== undefined);
      // It says nothing beside its calls, only once it is asked without tools.
      const text = extra.tools ? '' : 'Done.';
      return engineReply(text, [call(`call_${offered.length}`, { order_id: 7 })], usage);
    });
    expect(offered).toEqual([true, true, false]);
    expect(outcome).toMatchObject({
      kind: 'completed',
      reply: { text: 'Done.', usage: { promptTokens: 30, completionTokens: 6, cachedTokens: 3 } },
    });
    expect((outcome as { reply: EngineReply }).reply.toolCalls).toBeUndefined();
    expect((outcome as { toolCalls: unknown[] }).toolCalls).toHaveLength(MAX_ROUNDS);
  });
});
