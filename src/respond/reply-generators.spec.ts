import { Injectable, Module, Scope } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Test, type TestingModule } from '@nestjs/testing';
import type { EngineReply } from './engine/response-engine';
import {
  type Generated,
  type Generation,
  GeneratesReplies,
  type NextGeneration,
  type ReplyGenerator,
} from './reply-generation';
import { ReplyGenerators } from './reply-generators';
import { freshToolState } from '../tools/tool-turns.service';

const REPLY: EngineReply = {
  text: 'engine',
  emotion: { name: 'joy', intensity: 0.5 },
  detected: { name: 'joy', intensity: 0.5 },
  usage: null,
  model: null,
  facts: [],
};

function generation(log: string[]): Generation {
  return {
    organizationId: 'org',
    turn: {
      endUserId: 'end-user',
      userId: 'user',
      state: freshToolState('user', 'hello', []),
      assertRoomFor: () => Promise.resolve(),
      tokenSteps: () => [],
    },
    request: {
      personality: {} as Generation['request']['personality'],
      message: 'hello',
      memories: [],
      facts: [],
      recalled: [],
      knowledge: [],
      crisis: false,
      vocabulary: { version: '1', emotions: [] } as unknown as Generation['request']['vocabulary'],
    },
    signal: new AbortController().signal,
    onDelta: (text) => Promise.resolve(void log.push(`delta ${text}`)),
  };
}

/** The engine at the chain's heart: streams its text and records the request it was given. */
function engine(log: string[]): NextGeneration {
  return async (inner) => {
    log.push(`engine crisis=${inner.request.crisis}`);
    await inner.onDelta?.(REPLY.text);
    return { kind: 'reply', reply: REPLY, engineAsked: true, toolCalls: [] };
  };
}

/** A participant named `name` that logs its way in and out, around `next` or instead of it. */
function participant(name: string, log: string[], answersInstead = false, order = 100) {
  @Injectable()
  @GeneratesReplies({ order })
  class Fake implements ReplyGenerator {
    async generate(outer: Generation, next: NextGeneration): Promise<Generated> {
      log.push(`${name} in`);
      if (answersInstead) {
        return {
          kind: 'reply',
          reply: { ...REPLY, text: name },
          engineAsked: false,
          toolCalls: [],
        };
      }
      const generated = await next({
        ...outer,
        request: { ...outer.request, crisis: true },
        onDelta: async (text) => outer.onDelta?.(`${name}(${text})`),
      });
      log.push(`${name} out`);
      if (generated.kind === 'paused') return generated;
      return {
        ...generated,
        reply: { ...generated.reply, text: `${name}[${generated.reply.text}]` },
      };
    }
  }
  Object.defineProperty(Fake, 'name', { value: name });
  return Fake;
}

describe('ReplyGenerators', () => {
  let moduleRef: TestingModule | undefined;

  async function generatorsOf(...providers: Array<new (...args: never[]) => unknown>) {
    @Module({ providers })
    class Features {}
    const compiled = await Test.createTestingModule({
      imports: [DiscoveryModule, Features],
      providers: [ReplyGenerators],
    }).compile();
    // A module whose start-up failed holds nothing to close (and its close() would throw again).
    await compiled.init();
    moduleRef = compiled;
    return compiled.get(ReplyGenerators);
  }

  afterEach(async () => {
    await moduleRef?.close();
    moduleRef = undefined;
  });

  it('with no participant, the engine alone writes the reply', async () => {
    const log: string[] = [];
    const generators = await generatorsOf();
    const generated = await generators.generate(generation(log), engine(log));
    expect(generated).toMatchObject({ kind: 'reply', reply: { text: 'engine' } });
    expect(log).toEqual(['engine crisis=false', 'delta engine']);
  });

  it('nests by stated order before class name', async () => {
    const log: string[] = [];
    const generators = await generatorsOf(
      participant('Alpha', log, false, 200),
      participant('Beta', log, false, 100),
    );
    await generators.generate(generation(log), engine(log));
    expect(log.filter((line) => line.endsWith(' in'))).toEqual(['Beta in', 'Alpha in']);
  });

  it('nests participants of one order by class name, whatever the order they are provided in', async () => {
    const log: string[] = [];
    const generators = await generatorsOf(participant('Beta', log), participant('Alpha', log));
    const generated = await generators.generate(generation(log), engine(log));

    // Alpha is outermost: first in, last out; the request and stream pass through both.
    expect(log).toEqual([
      'Alpha in',
      'Beta in',
      'engine crisis=true',
      'delta Alpha(Beta(engine))',
      'Beta out',
      'Alpha out',
    ]);
    expect(generated).toMatchObject({ kind: 'reply', reply: { text: 'Alpha[Beta[engine]]' } });
  });

  it('a participant may answer in the engine’s place: nothing inside it runs', async () => {
    const log: string[] = [];
    const generators = await generatorsOf(
      participant('Alpha', log, true),
      participant('Beta', log),
    );
    const generated = await generators.generate(generation(log), engine(log));
    expect(log).toEqual(['Alpha in']);
    expect(generated).toMatchObject({ reply: { text: 'Alpha' }, engineAsked: false });
  });

  it('passes a paused turn out untouched', async () => {
    const log: string[] = [];
    const generators = await generatorsOf(participant('Alpha', log));
    const paused: Generated = { kind: 'paused', turnId: 'turn_1', toolCalls: [] };
    await expect(generators.generate(generation(log), () => Promise.resolve(paused))).resolves.toBe(
      paused,
    );
  });

  it('refuses at start-up a participant that is not a singleton', async () => {
    @Injectable({ scope: Scope.TRANSIENT })
    @GeneratesReplies({ order: 100 })
    class PerRequest implements ReplyGenerator {
      generate(outer: Generation, next: NextGeneration): Promise<Generated> {
        return next(outer);
      }
    }
    await expect(generatorsOf(PerRequest)).rejects.toThrow(
      'reply generator PerRequest must be a singleton',
    );
  });
});
