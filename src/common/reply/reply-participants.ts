import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import {
  REPLY_CONTEXT_FIELDS,
  type ReplyContext,
  type ReplyContextField,
  type ReplyParticipant,
  ReadsForReplies,
  type ReplyTurn,
} from './reply-participant';

interface FoundParticipant {
  fields: readonly ReplyContextField[];
  participant: ReplyParticipant;
}

/** Every provider marked @ReadsForReplies(…), and the reads of one reply across all of them. */
@Injectable()
export class ReplyParticipants implements OnModuleInit {
  private participants: readonly FoundParticipant[] = [];

  constructor(private readonly discovery: DiscoveryService) {}

  /**
   * After every provider is built, so participants of modules built later are found too. What
   * could go wrong at a reply is refused here, at start-up: a participant that is not one
   * singleton, one provided twice, and a field two participants write.
   */
  onModuleInit(): void {
    const found: FoundParticipant[] = [];
    const writers = new Map<ReplyContextField, string>();
    for (const wrapper of this.discovery.getProviders({ metadataKey: ReadsForReplies.KEY })) {
      const participant = wrapper.instance as ReplyParticipant | undefined;
      const name = String(wrapper.name);
      // A transient provider's static instance is a bare prototype: its constructor never ran.
      if (!participant || wrapper.isTransient || !wrapper.isDependencyTreeStatic()) {
        throw new Error(`reply participant ${name} must be a singleton`);
      }
      const fields = (Reflect.getMetadata(ReadsForReplies.KEY, wrapper.metatype as object) ??
        []) as readonly ReplyContextField[];
      for (const field of fields) {
        const earlier = writers.get(field);
        // One class provided by two modules is two instances: it would read twice.
        if (earlier) throw new Error(`${earlier} and ${name} both write ${field} for replies`);
        writers.set(field, name);
      }
      found.push({ fields, participant });
    }
    this.participants = found;
  }

  /** Refuses to start a reply path some field of whose context no participant writes. */
  assertEveryFieldWritten(): void {
    const written = new Set(this.participants.flatMap(({ fields }) => fields));
    const missing = REPLY_CONTEXT_FIELDS.filter((field) => !written.has(field));
    if (missing.length > 0) {
      throw new Error(`no reply participant writes ${missing.join(', ')}: is its module imported?`);
    }
  }

  /**
   * Every participant's reads for the turn, at once, merged: of what each answers, only the
   * fields it declared. The first failure fails the reply (the others' reads are left to
   * finish; they write nothing).
   */
  async read(turn: ReplyTurn): Promise<ReplyContext> {
    const contributions = await Promise.all(
      this.participants.map(async ({ fields, participant }) => ({
        fields,
        contribution: await participant.readReplyContext(turn),
      })),
    );
    const context: ReplyContext = { history: [], facts: [], recalled: [], knowledge: [] };
    for (const { fields, contribution } of contributions) {
      for (const field of fields) {
        if (contribution[field] !== undefined)
          Object.assign(context, { [field]: contribution[field] });
      }
    }
    return context;
  }
}
