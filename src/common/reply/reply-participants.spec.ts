import { Injectable, Module, Scope } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  ReadsForReplies,
  type ReplyContextField,
  type ReplyContribution,
  type ReplyParticipant,
  type ReplyTurn,
} from './reply-participant';
import { ReplyParticipants } from './reply-participants';
import {
  AdmitsReplies,
  type AdmittedTurn,
  type CountedTokens,
  type ExchangeContribution,
  type ExchangeSourceName,
  type ExchangeSources,
  type ReplyAdmission,
  type ReplyStoreParticipant,
  type StoredExchange,
  StoresReplies,
} from './reply-store';
import { Cte, type Sql, sql, withEntries } from '../../database/sql';
import { ReplyParticipantsModule } from './reply-participants.module';

const TURN: ReplyTurn = {
  organizationId: 'org',
  personalityId: 'personality',
  userId: 'ada',
  message: 'hello',
};

/**
 * A participant named `name` writing `fields`, whose answer the test decides; it keeps the turns
 * it was asked.
 */
function fake(
  name: string,
  fields: [ReplyContextField, ...ReplyContextField[]],
  contribution: (turn: ReplyTurn) => Promise<ReplyContribution>,
) {
  @Injectable()
  @ReadsForReplies(...fields)
  class Fake implements ReplyParticipant {
    readonly turns: ReplyTurn[] = [];
    readReplyContext(turn: ReplyTurn): Promise<ReplyContribution> {
      this.turns.push(turn);
      return contribution(turn);
    }
  }
  Object.defineProperty(Fake, 'name', { value: name });
  return Fake;
}

describe('ReplyParticipants', () => {
  let moduleRef: TestingModule | undefined;

  async function participantsOf(...modules: Array<new () => unknown>) {
    const compiled = await Test.createTestingModule({
      imports: [ReplyParticipantsModule, ...modules],
    }).compile();
    // A module whose start-up failed holds nothing to close (and its close() would throw again).
    await compiled.init();
    moduleRef = compiled;
    return { participants: compiled.get(ReplyParticipants), moduleRef: compiled };
  }

  afterEach(async () => {
    await moduleRef?.close();
    moduleRef = undefined;
  });

  it('merges what each participant read; a field it leaves out is empty', async () => {
    const Memory = fake('Memory', ['history', 'facts', 'recalled'], async (turn) => ({
      history: [{ role: 'user', content: `${turn.userId} said hi`, emotion: null }],
      facts: ['Likes tea'],
    }));
    @Module({ providers: [Memory] })
    class MemoryModule {}
    const { participants } = await participantsOf(MemoryModule);

    await expect(participants.read(TURN)).resolves.toEqual({
      history: [{ role: 'user', content: 'ada said hi', emotion: null }],
      facts: ['Likes tea'],
      recalled: [],
      knowledge: [],
    });
    expect(moduleRef!.get(Memory).turns).toEqual([TURN]);
  });

  it('takes of an answer only the fields the participant declared', async () => {
    const Knowledge = fake('Knowledge', ['knowledge'], async () => ({
      knowledge: [],
      endUser: { id: 'x', organization_id: 'other', user_id: 'ada', status: 'active' },
      facts: ['smuggled'],
    }));
    @Module({ providers: [Knowledge] })
    class Features {}
    const { participants } = await participantsOf(Features);
    const context = await participants.read(TURN);
    expect(context.endUser).toBeUndefined();
    expect(context.facts).toEqual([]);
  });

  it('asks every participant at once, not one after another', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const First = fake('First', ['facts'], async () => {
      await gate;
      return { facts: ['one'] };
    });
    const Second = fake('Second', ['recalled'], async () => {
      await gate;
      return { recalled: [] };
    });
    @Module({ providers: [First, Second] })
    class Features {}
    const { participants } = await participantsOf(Features);

    const read = participants.read(TURN);
    await new Promise((resolve) => setImmediate(resolve));
    // Both were asked before either answered.
    expect(moduleRef!.get(First).turns).toHaveLength(1);
    expect(moduleRef!.get(Second).turns).toHaveLength(1);
    release();
    await expect(read).resolves.toMatchObject({ facts: ['one'] });
  });

  it('refuses at start-up two participants declaring the same field, naming both', async () => {
    const Alpha = fake('Alpha', ['facts'], async () => ({ facts: ['a'] }));
    const Beta = fake('Beta', ['history', 'facts'], async () => ({ facts: ['b'] }));
    @Module({ providers: [Alpha, Beta] })
    class Features {}
    await expect(participantsOf(Features)).rejects.toThrow(
      'Alpha and Beta both write facts for replies',
    );
  });

  it('refuses at start-up a participant two modules provide (it would read twice)', async () => {
    const Shared = fake('Shared', ['facts'], async () => ({ facts: ['twice'] }));
    @Module({ providers: [Shared] })
    class First {}
    @Module({ providers: [Shared] })
    class Second {}
    await expect(participantsOf(First, Second)).rejects.toThrow(
      'Shared and Shared both write facts for replies',
    );
  });

  it('refuses at start-up a participant that is not a singleton', async () => {
    @Injectable({ scope: Scope.TRANSIENT })
    @ReadsForReplies('facts')
    class Transient implements ReplyParticipant {
      readReplyContext(): Promise<ReplyContribution> {
        return Promise.resolve({ facts: [] });
      }
    }
    @Module({ providers: [Transient] })
    class Features {}
    await expect(participantsOf(Features)).rejects.toThrow(
      'reply participant Transient must be a singleton',
    );
  });

  it('reads once with a participant one module provides and another imports', async () => {
    const Shared = fake('Shared', ['facts'], async () => ({ facts: ['once'] }));
    @Module({ providers: [Shared], exports: [Shared] })
    class Owner {}
    @Module({ imports: [Owner] })
    class User {}
    const { participants } = await participantsOf(Owner, User);
    await expect(participants.read(TURN)).resolves.toMatchObject({ facts: ['once'] });
    expect(moduleRef!.get(Shared).turns).toHaveLength(1);
  });

  it('fails the read when one participant fails', async () => {
    const Broken = fake('Broken', ['facts'], async () => {
      throw new Error('database gone');
    });
    const Fine = fake('Fine', ['recalled'], async () => ({ recalled: [] }));
    @Module({ providers: [Broken, Fine] })
    class Features {}
    const { participants } = await participantsOf(Features);
    await expect(participants.read(TURN)).rejects.toThrow('database gone');
  });

  it('a provider without the decorator takes no part', async () => {
    @Injectable()
    class Unmarked implements ReplyParticipant {
      readReplyContext(): Promise<ReplyContribution> {
        return Promise.resolve({ facts: ['never'] });
      }
    }
    @Module({ providers: [Unmarked] })
    class Features {}
    const { participants } = await participantsOf(Features);
    await expect(participants.read(TURN)).resolves.toMatchObject({ facts: [] });
  });

  it('names the fields no participant writes, and is satisfied once every field has one', async () => {
    const Memory = fake('Memory', ['endUser', 'history', 'facts', 'recalled'], async () => ({}));
    @Module({ providers: [Memory] })
    class MemoryOnly {}
    const partial = await participantsOf(MemoryOnly);
    expect(() => partial.participants.assertComplete()).toThrow(
      'no reply participant writes knowledge',
    );
    await moduleRef!.close();

    const Knowledge = fake('Knowledge', ['knowledge'], async () => ({}));
    @Module({ providers: [Memory, Knowledge] })
    class Both {}
    const whole = await participantsOf(Both);
    expect(() => whole.participants.assertComplete()).toThrow(
      'no reply store participant lends memories, relationship, tokens',
    );
    await moduleRef!.close();

    const Memories = store('Memories', ['memories']);
    const Usage = store('Usage', ['relationship', 'tokens']);
    @Module({ providers: [Memory, Knowledge, Memories, Usage] })
    class Everything {}
    const complete = await participantsOf(Everything);
    expect(() => complete.participants.assertComplete()).not.toThrow();
  });
});

const AT = new Date('2026-11-30T12:00:00Z');
const EXCHANGE: StoredExchange = {
  caller: { kind: 'api_key', apiKeyId: 'key', organizationId: 'org', scopes: ['admin'] },
  organizationId: 'org',
  endUserId: 'end-user',
  userId: 'ada',
  personalityId: 'personality',
  at: AT,
  vocabularyVersion: '1',
  message: {
    content: 'hello',
    emotion: { name: 'joy', intensity: 0.5 },
    safety: { flagged: false, categories: [], action: 'none' },
  },
  reply: {
    content: 'hi',
    emotion: { name: 'joy', intensity: 0.5 },
    safety: { flagged: false, categories: [], action: 'none' },
    toolCalls: null,
  },
  safety: { flagged: false, categories: [], action: 'none' },
  facts: [],
  tokens: { promptTokens: 3, completionTokens: 2, cachedTokens: 0, model: 'm' },
};
const COUNTED: CountedTokens = { ...EXCHANGE, tokens: EXCHANGE.tokens! };

/** Every column any source carries: a fake CTE fits wherever a source is asked for. */
const ANY_SOURCE_COLUMNS = [
  'id',
  'role',
  'organization_id',
  'month',
  'end_user_id',
  'personality_id',
  'used_tokens',
] as const;
const sourceCte = (name: string, body: Sql) => new Cte(name, body, ANY_SOURCE_COLUMNS);

/** The statement's text, one CTE per line, without the SELECT the sequencer ends it with. */
const textOf = (steps: Parameters<typeof withEntries>[0]) =>
  withEntries(steps, sql`SELECT 1`)
    .text.split('\n')
    .slice(0, -1);

/**
 * A store participant named `name` lending `lends` (a CTE per source, named after it, whose body
 * names the sources it saw), or lending none: then one step naming the sources it was given.
 */
function store(
  name: string,
  lends: ExchangeSourceName[] = [],
  extra: Partial<ExchangeContribution> = {},
) {
  const seen = (sources: ExchangeSources): Sql => sql`${Object.keys(sources).sort().join(' ')}`;
  @Injectable()
  @StoresReplies({ lends })
  class FakeStore implements ReplyStoreParticipant {
    readonly exchanges: StoredExchange[] = [];
    storeExchange(exchange: StoredExchange, sources: ExchangeSources): ExchangeContribution {
      this.exchanges.push(exchange);
      if (lends.length === 0) {
        return { steps: [new Cte(name.toLowerCase(), seen(sources))], ...extra };
      }
      const lent = Object.fromEntries(
        lends.map((source) => [source, sourceCte(source, seen(sources))]),
      );
      return { steps: Object.values(lent), lends: lent, ...extra };
    }
    countTokens(counted: CountedTokens, sources: ExchangeSources): ExchangeContribution {
      if (!lends.includes('tokens')) return { steps: [] };
      const tokens = sourceCte('counted_tokens', seen(sources));
      return { steps: [tokens], lends: { tokens } };
    }
  }
  Object.defineProperty(FakeStore, 'name', { value: name });
  return FakeStore;
}

/** An admitter whose admissions record what happened to them; `refuse` makes admit() throw. */
function admitter(name: string, log: string[], refuse = false) {
  @Injectable()
  @AdmitsReplies()
  class FakeAdmitter {
    admit(turn: AdmittedTurn): Promise<ReplyAdmission> {
      if (refuse) return Promise.reject(new Error(`${name} refused ${turn.endUserId}`));
      log.push(`${name} admitted`);
      return Promise.resolve({
        assertRoomFor: () => Promise.resolve(),
        storeExchange: (_exchange, sources) => [new Cte(`${name}_store`, seen(sources))],
        countTokens: (_counted, sources) => [new Cte(`${name}_count`, seen(sources))],
        settled: () => void log.push(`${name} settled`),
        release: () => void log.push(`${name} released`),
      });
    }
  }
  const seen = (sources: Partial<ExchangeSources>): Sql =>
    sql`${Object.keys(sources).sort().join(' ')}`;
  Object.defineProperty(FakeAdmitter, 'name', { value: name });
  return FakeAdmitter;
}

describe('ReplyParticipants: the statement storing a reply', () => {
  let moduleRef: TestingModule | undefined;

  async function participantsOf(...providers: Array<new (...args: never[]) => unknown>) {
    @Module({ providers })
    class Features {}
    const compiled = await Test.createTestingModule({
      imports: [ReplyParticipantsModule, Features],
    }).compile();
    await compiled.init();
    moduleRef = compiled;
    return compiled.get(ReplyParticipants);
  }

  afterEach(async () => {
    await moduleRef?.close();
    moduleRef = undefined;
  });

  it.each(['as listed', 'reversed'])(
    'puts the lenders first, then the admissions, then the others by name, whatever the order of the providers (%s)',
    async (order) => {
      const log: string[] = [];
      const providers = [
        store('Zebra'),
        store('Usage', ['relationship', 'tokens']),
        admitter('Budget', log),
        store('Alpha'),
        store('Memories', ['memories']),
      ];
      const participants = await participantsOf(
        ...(order === 'reversed' ? providers.reverse() : providers),
      );
      const admissions = await participants.admit({
        organizationId: 'org',
        endUserId: 'end-user',
        promptTexts: ['hello'],
      });
      const { steps, underLock } = participants.storeExchange(EXCHANGE, admissions);

      // Lenders see no source; every later step sees all three (in its CTE's parameter).
      expect(textOf(steps)).toEqual([
        'WITH memories AS ($1),',
        'relationship AS ($2),',
        'tokens AS ($3),',
        'Budget_store AS ($4),',
        'alpha AS ($5),',
        'zebra AS ($6)',
      ]);
      const statement = withEntries(steps, sql`SELECT 1`);
      expect(statement.values).toEqual([
        '',
        '',
        '',
        'memories relationship tokens',
        'memories relationship tokens',
        'memories relationship tokens',
      ]);
      expect(underLock).toEqual([]);
    },
  );

  it('counts tokens without a reply with only what lends tokens, then the admissions', async () => {
    const log: string[] = [];
    const participants = await participantsOf(
      store('Memories', ['memories']),
      store('Usage', ['relationship', 'tokens']),
      store('Flags'),
      admitter('Budget', log),
    );
    const admissions = await participants.admit({
      organizationId: 'org',
      endUserId: 'end-user',
      promptTexts: [],
    });
    const steps = participants.countTokens(COUNTED, admissions);
    expect(textOf(steps)).toEqual(['WITH counted_tokens AS ($1),', 'Budget_count AS ($2)']);
    expect(withEntries(steps, sql`SELECT 1`).values).toEqual(['', 'tokens']);
  });

  it('collects the steps that need a lock, to run last in a transaction', async () => {
    const locked = jest.fn(() => Promise.resolve([new Cte('facts', sql`SELECT 1`)]));
    const participants = await participantsOf(
      store('Memories', ['memories'], { underLock: locked }),
      store('Usage', ['relationship', 'tokens']),
    );
    const { underLock } = participants.storeExchange(EXCHANGE, []);
    expect(underLock).toEqual([locked]);
    expect(locked).not.toHaveBeenCalled();
  });

  it('gives back the admissions already made when a later admitter refuses', async () => {
    const log: string[] = [];
    const participants = await participantsOf(
      admitter('Alpha', log),
      admitter('Omega', log, true),
      store('Memories', ['memories']),
      store('Usage', ['relationship', 'tokens']),
    );
    await expect(
      participants.admit({ organizationId: 'org', endUserId: 'end-user', promptTexts: [] }),
    ).rejects.toThrow('Omega refused end-user');
    expect(log).toEqual(['Alpha admitted', 'Alpha released']);
  });

  it('refuses at start-up a lender of tokens that cannot count tokens without a reply', async () => {
    @Injectable()
    @StoresReplies({ lends: ['relationship', 'tokens'] })
    class Uncounting implements ReplyStoreParticipant {
      storeExchange(): ExchangeContribution {
        return { steps: [] };
      }
    }
    await expect(participantsOf(Uncounting)).rejects.toThrow(
      'Uncounting lends tokens to replies but counts no tokens without one',
    );
  });

  it('refuses at start-up a participant two modules provide (it would write twice)', async () => {
    const Flags = store('Flags');
    @Module({ providers: [Flags] })
    class One {}
    @Module({ providers: [Flags] })
    class Two {}
    const compiled = await Test.createTestingModule({
      imports: [ReplyParticipantsModule, One, Two],
    }).compile();
    await expect(compiled.init()).rejects.toThrow(
      'reply store participant Flags is provided by two modules',
    );
  });

  it('refuses at start-up two participants lending the same source', async () => {
    await expect(
      participantsOf(store('One', ['memories']), store('Two', ['memories'])),
    ).rejects.toThrow(/One and Two both lend memories|Two and One both lend memories/);
  });

  it('fails a statement whose lender did not lend what it declared', async () => {
    @Injectable()
    @StoresReplies({ lends: ['memories'] })
    class Forgetful implements ReplyStoreParticipant {
      storeExchange(): ExchangeContribution {
        return { steps: [] };
      }
    }
    const participants = await participantsOf(
      Forgetful,
      store('Usage', ['relationship', 'tokens']),
    );
    expect(() => participants.storeExchange(EXCHANGE, [])).toThrow(
      'Forgetful did not lend memories',
    );
  });
});
