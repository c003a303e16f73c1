import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  ReadsForReplies,
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

/** A participant named `name` whose answer the test decides, keeping the turns it was asked. */
function fake(name: string, contribution: (turn: ReplyTurn) => Promise<ReplyContribution>) {
  @Injectable()
  @ReadsForReplies()
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

async function participantsOf(...modules: Array<new () => unknown>) {
  const moduleRef = await Test.createTestingModule({
    imports: [ReplyParticipantsModule, ...modules],
  }).compile();
  await moduleRef.init();
  return { moduleRef, participants: moduleRef.get(ReplyParticipants) };
}

describe('ReplyParticipants', () => {
  it('merges what each participant read; a field none writes is empty', async () => {
    const Memory = fake('Memory', async (turn) => ({
      history: [{ role: 'user', content: `${turn.userId} said hi`, emotion: null }],
      facts: ['Likes tea'],
    }));
    @Module({ providers: [Memory] })
    class MemoryModule {}
    const { participants, moduleRef } = await participantsOf(MemoryModule);

    await expect(participants.read(TURN)).resolves.toEqual({
      history: [{ role: 'user', content: 'ada said hi', emotion: null }],
      facts: ['Likes tea'],
      recalled: [],
      knowledge: [],
    });
    expect(moduleRef.get(Memory).turns).toEqual([TURN]);
  });

  it('asks every participant at once, not one after another', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const First = fake('First', async () => {
      await gate;
      return { facts: ['one'] };
    });
    const Second = fake('Second', async () => {
      await gate;
      return { recalled: [] };
    });
    @Module({ providers: [First, Second] })
    class Features {}
    const { participants, moduleRef } = await participantsOf(Features);

    const read = participants.read(TURN);
    await new Promise((resolve) => setImmediate(resolve));
    // Both were asked before either answered.
    expect(moduleRef.get(First).turns).toHaveLength(1);
    expect(moduleRef.get(Second).turns).toHaveLength(1);
    release();
    await expect(read).resolves.toMatchObject({ facts: ['one'] });
  });

  it('refuses two participants writing the same field, naming both', async () => {
    const Alpha = fake('Alpha', async () => ({ facts: ['a'] }));
    const Beta = fake('Beta', async () => ({ facts: ['b'] }));
    @Module({ providers: [Alpha, Beta] })
    class Features {}
    const { participants } = await participantsOf(Features);
    await expect(participants.read(TURN)).rejects.toThrow(
      'Alpha and Beta both contribute facts to a reply',
    );
  });

  it('fails the read when one participant fails', async () => {
    const Broken = fake('Broken', async () => {
      throw new Error('database gone');
    });
    const Fine = fake('Fine', async () => ({ facts: ['fine'] }));
    @Module({ providers: [Broken, Fine] })
    class Features {}
    const { participants } = await participantsOf(Features);
    await expect(participants.read(TURN)).rejects.toThrow('database gone');
  });

  it('refuses a participant two modules provide (it would read twice)', async () => {
    const Shared = fake('Shared', async () => ({ facts: ['twice'] }));
    @Module({ providers: [Shared] })
    class First {}
    @Module({ providers: [Shared] })
    class Second {}
    await expect(participantsOf(First, Second)).rejects.toThrow(
      'two reply participants are named Shared',
    );
  });

  it('reads once with a participant one module provides and another imports', async () => {
    const Shared = fake('Shared', async () => ({ facts: ['once'] }));
    @Module({ providers: [Shared], exports: [Shared] })
    class Owner {}
    @Module({ imports: [Owner] })
    class User {}
    const { participants, moduleRef } = await participantsOf(Owner, User);
    await expect(participants.read(TURN)).resolves.toMatchObject({ facts: ['once'] });
    expect(moduleRef.get(Shared).turns).toHaveLength(1);
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
});
