import { DiscoveryModule } from '@nestjs/core';
import { Test, type TestingModule } from '@nestjs/testing';
import { AppError } from '../common/errors/app-error';
import { Clock } from '../common/time/clock';
import { toolsConfig } from '../config/tools.config';
import type { EngineReply } from '../respond/engine/response-engine';
import type { Generation, NextGeneration } from '../respond/reply-generation';
import { ReplyGenerators } from '../respond/reply-generators';
import { ReplySafety } from '../safety/reply-safety.service';
import { ScreenedReplies } from '../safety/screened-replies.generator';
import { ToolMetrics } from './tool-metrics';
import { toolResultTexts } from '../respond/prompt-texts';
import { ToolRounds } from './tool-rounds.generator';
import { ToolTurnsRepository } from './tool-turns.repository';
import { OrganizationsService } from '../organizations/organizations.service';
import { freshToolState, ToolTurnsService } from './tool-turns.service';
import { WebhookToolCaller } from './webhook-tool-caller';

const NONE = { flagged: false, categories: [], action: 'none' as const };
const USAGE = { promptTokens: 10, completionTokens: 5, cachedTokens: 0 };

function reply(text: string, toolCalls?: EngineReply['toolCalls']): EngineReply {
  return {
    text,
    emotion: { name: 'joy', intensity: 0.5 },
    detected: { name: 'joy', intensity: 0.5 },
    usage: USAGE,
    model: 'm',
    facts: [],
    toolCalls,
  };
}

/**
 * The two real participants that wrap every reply's model calls, with their collaborators faked:
 * safety's screening around tools' rounds (the order their class names give), each round's
 * engine call at the heart.
 */
describe('ToolRounds inside ScreenedReplies', () => {
  let moduleRef: TestingModule;
  const log: string[] = [];
  const admitted: number[] = [];
  const addedTexts: Array<readonly string[]> = [];
  let roomLeft = Infinity;

  beforeEach(async () => {
    log.length = 0;
    admitted.length = 0;
    addedTexts.length = 0;
    roomLeft = Infinity;
    const safety: Partial<ReplySafety> = {
      screenMessage: () => {
        log.push('screen message');
        return Promise.resolve({
          settings: { outputModeration: 'flag' } as Awaited<
            ReturnType<ReplySafety['screenMessage']>
          >['settings'],
          verdict: NONE,
          crisis: false,
          blocked: false,
        });
      },
      screenReply: (_settings, text) => {
        log.push(`screen reply ${text}`);
        return Promise.resolve([]);
      },
      replyVerdict: () => NONE,
      exchangeVerdict: () => NONE,
    };
    moduleRef = await Test.createTestingModule({
      imports: [DiscoveryModule],
      providers: [
        ReplyGenerators,
        ScreenedReplies,
        ToolRounds,
        ToolTurnsService,
        Clock,
        { provide: ReplySafety, useValue: safety },
        { provide: ToolTurnsRepository, useValue: {} },
        { provide: WebhookToolCaller, useValue: {} },
        { provide: ToolMetrics, useValue: { count: () => undefined } },
        {
          provide: OrganizationsService,
          useValue: { accountOf: (id: string) => Promise.resolve(id) },
        },
        { provide: toolsConfig.KEY, useValue: { maxRounds: 4, turnTtlSeconds: 600 } },
      ],
    }).compile();
    await moduleRef.init();
  });
  afterEach(() => moduleRef.close());

  function generation(): Generation {
    return {
      organizationId: 'org',
      turn: {
        endUserId: 'end-user',
        userId: 'user',
        state: freshToolState('user', 'book at 9', [
          { name: 'book', description: 'Books', parameters: { type: 'object' } },
        ]),
        assertRoomFor: (tokens, added = []) => {
          admitted.push(tokens);
          addedTexts.push(added);
          if (tokens > roomLeft) return Promise.reject(new AppError('budget_exceeded', 'spent'));
          return Promise.resolve();
        },
        tokenSteps: () => [],
      },
      request: {
        personality: { id: 'p', tools: [] } as unknown as Generation['request']['personality'],
        message: 'book at 9',
        memories: [],
        facts: [],
        recalled: [],
        knowledge: [],
        crisis: false,
        vocabulary: {
          version: '1',
          emotions: [],
        } as unknown as Generation['request']['vocabulary'],
      },
      signal: new AbortController().signal,
    };
  }

  /** Round 1 calls a tool the turn does not have (its error goes back), round 2 answers. */
  const engine: NextGeneration = async ({ request }) => {
    const round = (request.toolResults?.length ?? 0) + 1;
    log.push(`engine round ${round} tools=${request.tools?.map((t) => t.name).join(',')}`);
    return {
      kind: 'reply',
      reply:
        round === 1 ? reply('', [{ id: 'c1', name: 'no_such', arguments: {} }]) : reply('done'),
      engineAsked: true,
      toolCalls: [],
    };
  };

  it('screens the message once before every round and the final reply once after them', async () => {
    const generated = await moduleRef.get(ReplyGenerators).generate(generation(), engine);

    expect(log).toEqual([
      'screen message',
      'engine round 1 tools=book',
      'engine round 2 tools=book',
      'screen reply done',
    ]);
    expect(generated).toMatchObject({
      kind: 'reply',
      engineAsked: true,
      // Both rounds' tokens, on the reply that is stored.
      reply: { text: 'done', usage: { promptTokens: 20, completionTokens: 10 } },
      toolCalls: [{ id: 'c1', name: 'no_such', error: 'no such tool' }],
      verdicts: { exchange: NONE },
    });
    // The second round was admitted for what the first spent, its call estimated with the
    // first round's call and answer; the first by prepare, not here.
    expect(admitted).toEqual([15]);
    expect(addedTexts).toEqual([
      toolResultTexts([
        { call: { id: 'c1', name: 'no_such', arguments: {} }, output: { error: 'no such tool' } },
      ]),
    ]);
  });

  it("asks the budgets before the next route when a route's billed answer was no reply", async () => {
    roomLeft = 14;
    const refused = generation();
    const asked: string[] = [];
    // As the engine does: the first route refused (billed, 15 tokens), then the next route.
    const refusingFirst: NextGeneration = async ({ request }) => {
      asked.push('route 1');
      request.onUncountedSpend?.(USAGE, 'm');
      await request.roomForAnotherCall?.();
      asked.push('route 2');
      return { kind: 'reply', reply: reply('done'), engineAsked: true, toolCalls: [] };
    };
    await expect(
      moduleRef.get(ReplyGenerators).generate(refused, refusingFirst),
    ).rejects.toMatchObject({ code: 'budget_exceeded' });
    expect(asked).toEqual(['route 1']);
    expect(admitted).toEqual([15]);
    // The billed refusal stays on the turn, counted when it fails.
    expect(refused.turn.state.usage).toEqual(USAGE);
  });

  it('keeps what a round that called tools said: streamed, screened, stored and given back', async () => {
    const deltas: string[] = [];
    const asked: Array<string | undefined> = [];
    const streamed: Generation = {
      ...generation(),
      onDelta: (text) => Promise.resolve(void deltas.push(text)),
    };
    const saying: NextGeneration = async ({ request, onDelta }) => {
      const round = (request.toolResults?.length ?? 0) + 1;
      asked.push(request.toolResults?.[0]?.said);
      // Streamed as it comes, white space and all.
      const text = round === 1 ? 'Let me check. ' : 'Booked.';
      await onDelta?.(text);
      return {
        kind: 'reply',
        reply: reply(text, round === 1 ? [{ id: 'c1', name: 'no_such', arguments: {} }] : []),
        engineAsked: true,
        toolCalls: [],
      };
    };

    const generated = await moduleRef.get(ReplyGenerators).generate(streamed, saying);

    expect(deltas).toEqual(['Let me check. ', '\n\nBooked.']);
    expect(generated).toMatchObject({ kind: 'reply', reply: { text: deltas.join('') } });
    expect(log.at(-1)).toBe('screen reply Let me check. \n\nBooked.');
    // The model's second call carries what it said beside its first.
    expect(asked).toEqual([undefined, 'Let me check. ']);
  });

  it('screens a resumed reply whole, what was said before its pause included', async () => {
    const resumed = generation();
    resumed.turn.state.results = [
      { call: { id: 'c0', name: 'book', arguments: {} }, output: 1, said: 'Let me check.' },
    ];
    resumed.turn.state.usage = USAGE;

    const generated = await moduleRef.get(ReplyGenerators).generate(resumed, engine);

    expect(generated).toMatchObject({ reply: { text: 'Let me check.\n\ndone' } });
    expect(log).toEqual([
      'screen message',
      'engine round 2 tools=book',
      'screen reply Let me check.\n\ndone',
    ]);
    // Its calls and outputs so far were in the resumption's admitted estimate: nothing is added.
    expect(admitted).toEqual([15]);
    expect(addedTexts).toEqual([[]]);
  });

  it('ends the turn before a round its budgets have no room for', async () => {
    roomLeft = 14;
    const refused = generation();
    await expect(moduleRef.get(ReplyGenerators).generate(refused, engine)).rejects.toMatchObject({
      code: 'budget_exceeded',
    });
    expect(log).toEqual(['screen message', 'engine round 1 tools=book']);
    // What the first round spent stays on the turn: a failed turn's tokens are counted from it.
    expect(refused.turn.state.usage).toEqual(USAGE);
  });
});
