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
    expect(() => partial.participants.assertEveryFieldWritten()).toThrow(
      'no reply participant writes knowledge',
    );
    await moduleRef!.close();

    const Knowledge = fake('Knowledge', ['knowledge'], async () => ({}));
    @Module({ providers: [Memory, Knowledge] })
    class Both {}
    const whole = await participantsOf(Both);
    expect(() => whole.participants.assertEveryFieldWritten()).not.toThrow();
  });
});
