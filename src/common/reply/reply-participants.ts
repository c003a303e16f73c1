import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import {
  ReadsForReplies,
  type ReplyContext,
  type ReplyContribution,
  type ReplyParticipant,
  type ReplyTurn,
} from './reply-participant';

interface NamedParticipant {
  name: string;
  participant: ReplyParticipant;
}

/** Every provider marked @ReadsForReplies(), and the reads of one reply across all of them. */
@Injectable()
export class ReplyParticipants implements OnModuleInit {
  private participants: readonly NamedParticipant[] = [];

  constructor(private readonly discovery: DiscoveryService) {}

  /** After every provider is built, so participants of modules built later are found too. */
  onModuleInit(): void {
    const found = new Map<string, NamedParticipant>();
    for (const wrapper of this.discovery.getProviders({ metadataKey: ReadsForReplies.KEY })) {
      const instance = wrapper.instance as ReplyParticipant | undefined;
      if (!instance || !wrapper.isDependencyTreeStatic()) {
        throw new Error(`reply participant ${String(wrapper.name)} must be a singleton`);
      }
      const name = instance.constructor.name;
      const earlier = found.get(name);
      // One provider registered in two modules is two instances: it would read twice.
      if (earlier && earlier.participant !== instance) {
        throw new Error(`two reply participants are named ${name}`);
      }
      found.set(name, { name, participant: instance });
    }
    this.participants = [...found.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Every participant's reads for the turn, at once, merged. The first failure fails the reply
   * (the others' reads are left to finish; they write nothing).
   */
  async read(turn: ReplyTurn): Promise<ReplyContext> {
    const contributions = await Promise.all(
      this.participants.map(async ({ name, participant }) => ({
        name,
        contribution: await participant.readReplyContext(turn),
      })),
    );
    const context: ReplyContext = { history: [], facts: [], recalled: [], knowledge: [] };
    const writers = new Map<string, string>();
    for (const { name, contribution } of contributions) {
      for (const field of Object.keys(contribution) as Array<keyof ReplyContribution>) {
        const value = contribution[field];
        if (value === undefined) continue;
        const earlier = writers.get(field);
        if (earlier) throw new Error(`${earlier} and ${name} both contribute ${field} to a reply`);
        writers.set(field, name);
        Object.assign(context, { [field]: value });
      }
    }
    return context;
  }
}
