import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { WithEntry } from '../../database/sql';
import { discoveredOnce, singletonOf } from './discovered';
import { ExchangeComposer, type ExchangeStatement } from './exchange-composer';
import {
  REPLY_CONTEXT_FIELDS,
  type ReplyContext,
  type ReplyContextField,
  type ReplyParticipant,
  ReadsForReplies,
  type ReplyTurn,
} from './reply-participant';
import {
  type AdmittedTurn,
  AdmitsReplies,
  type CountedTokens,
  type ReplyAdmission,
  type ReplyAdmitter,
  type ReplyStoreParticipant,
  type StoredExchange,
  StoresReplies,
} from './reply-store';

interface FoundParticipant {
  fields: readonly ReplyContextField[];
  participant: ReplyParticipant;
}

/**
 * Every provider taking part in replies, found by its decorator, and each phase of one reply
 * across all of them: the reads (@ReadsForReplies), the admission (@AdmitsReplies) and the
 * statement that stores it (@StoresReplies).
 */
@Injectable()
export class ReplyParticipants implements OnModuleInit {
  private participants: readonly FoundParticipant[] = [];
  private exchanges = new ExchangeComposer([]);
  private admitters: readonly ReplyAdmitter[] = [];

  constructor(private readonly discovery: DiscoveryService) {}

  /**
   * After every provider is built, so participants of modules built later are found too. What
   * could go wrong at a reply is refused here, at start-up: a participant that is not one
   * singleton, one provided twice, a field two participants write, a source two lend.
   */
  onModuleInit(): void {
    this.participants = this.findReaders();
    this.exchanges = new ExchangeComposer(
      discoveredOnce<ReplyStoreParticipant>(
        this.discovery,
        StoresReplies.KEY,
        'reply store participant',
      ),
    );
    this.admitters = discoveredOnce<ReplyAdmitter>(
      this.discovery,
      AdmitsReplies.KEY,
      'reply admitter',
    )
      // By class name: the statement's text (and its prepared name) must not depend on imports.
      .sort((a, b) => a.constructor.name.localeCompare(b.constructor.name));
  }

  private findReaders(): FoundParticipant[] {
    const found: FoundParticipant[] = [];
    const writers = new Map<ReplyContextField, string>();
    for (const wrapper of this.discovery.getProviders({ metadataKey: ReadsForReplies.KEY })) {
      const participant = singletonOf<ReplyParticipant>(wrapper, 'reply participant');
      const name = String(wrapper.name);
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
    return found;
  }

  /**
   * Refuses to start a reply path with a field of its context that no participant writes, or a
   * source of its statement that nobody lends.
   */
  assertComplete(): void {
    const written = new Set(this.participants.flatMap(({ fields }) => fields));
    const missing = REPLY_CONTEXT_FIELDS.filter((field) => !written.has(field));
    if (missing.length > 0) {
      throw new Error(`no reply participant writes ${missing.join(', ')}: is its module imported?`);
    }
    const unlent = this.exchanges.unlent();
    if (unlent.length > 0) {
      throw new Error(
        `no reply store participant lends ${unlent.join(', ')}: is its module imported?`,
      );
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

  /**
   * Every admitter's admission of the reply, one after the other (a refusal gives back those
   * already admitted, and answers).
   */
  async admit(turn: AdmittedTurn): Promise<ReplyAdmission[]> {
    const admitted: ReplyAdmission[] = [];
    try {
      for (const admitter of this.admitters) admitted.push(await admitter.admit(turn));
    } catch (error) {
      for (const admission of admitted) admission.release();
      throw error;
    }
    return admitted;
  }

  /** The statement storing an exchange (ExchangeComposer). */
  storeExchange(
    exchange: StoredExchange,
    admissions: readonly ReplyAdmission[],
  ): ExchangeStatement {
    return this.exchanges.storeExchange(exchange, admissions);
  }

  /** The statement counting a turn's tokens without a reply (a pause, a failure). */
  countTokens(counted: CountedTokens, admissions: readonly ReplyAdmission[]): WithEntry[] {
    return this.exchanges.countTokens(counted, admissions);
  }
}
