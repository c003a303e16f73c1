import { DiscoveryService } from '@nestjs/core';
import type { EntityManager } from 'typeorm';
import type { Source, WithEntry } from '../../database/sql';
import type { CallerContext } from '../auth/caller';

/** A message's or a reply's safety verdict, or the exchange's (docs/safety.md). */
export interface StoredVerdict {
  flagged: boolean;
  /** Moderated categories, as SAFETY_CATEGORIES names them. */
  categories: string[];
  action: 'none' | 'flagged' | 'crisis_response' | 'blocked';
}

/** One of the exchange's two messages as it is stored. */
export interface StoredMessage {
  content: string;
  emotion: { name: string; intensity: number };
  safety: StoredVerdict;
}

/** Tokens one turn's model calls spent, and the model that wrote the last of them. */
export interface SpentTokens {
  promptTokens: number;
  completionTokens: number;
  /** Of the prompt tokens, those the provider served from its prompt cache. */
  cachedTokens: number;
  /** Null: counted in the month only (no model asked, or none reported). */
  model: string | null;
}

/** Who a turn is for: the same for everything its statement writes. */
export interface TurnOwner {
  caller: CallerContext;
  organizationId: string;
  endUserId: string;
  /** The organization's id of the end user. */
  userId: string;
  personalityId: string;
  at: Date;
}

/** A reply's exchange, complete and screened, as the statement that stores it writes it. */
export interface StoredExchange extends TurnOwner {
  vocabularyVersion: string | null;
  message: StoredMessage;
  reply: StoredMessage & {
    /** The turn's tool calls (contract §26), kept with the reply; null: none. */
    toolCalls: unknown[] | null;
  };
  /** The stronger of the two verdicts: what the answer and a flag report. */
  safety: StoredVerdict;
  /** Facts the engine learned from the message, as it gave them. */
  facts: string[];
  /** Null: the engine was not asked (a refused message). */
  tokens: SpentTokens | null;
}

/** Tokens of a turn counted without a reply: it paused for client tools, or failed. */
export interface CountedTokens extends TurnOwner {
  tokens: SpentTokens;
  /** The end user was erased while the turn ran: only rows that outlive them are written. */
  endUserErased?: boolean;
}

/**
 * The rows a stored exchange's statement lends to its other steps: the two new memories, the
 * relationship counted for the first time in its month, the month's new token total (null when
 * no tokens were spent).
 */
export interface ExchangeSources {
  memories: Source<'id' | 'role'>;
  relationship: Source<'organization_id' | 'month' | 'end_user_id' | 'personality_id'>;
  tokens: Source<'organization_id' | 'month' | 'used_tokens'> | null;
}

/** What the statement counting tokens without a reply lends: the month's new token total. */
export type TokenSources = Pick<ExchangeSources, 'tokens'>;

export type ExchangeSourceName = keyof ExchangeSources;

/** Every source of ExchangeSources, in the order their steps enter the statement. */
export const EXCHANGE_SOURCES: readonly ExchangeSourceName[] = [
  'memories',
  'relationship',
  'tokens',
];

/** A participant's part in the statement storing an exchange. */
export interface ExchangeContribution {
  steps: WithEntry[];
  /** The sources it declared it lends (@StoresReplies({ lends })), each among its steps. */
  lends?: Partial<ExchangeSources>;
  /**
   * Steps that need a lock first, taken in the statement's transaction (the end user's fact
   * lock): they enter the statement last, and only then is it run in a transaction.
   */
  underLock?: (manager: EntityManager) => Promise<WithEntry[]>;
}

/**
 * A module's part in the one statement that stores a reply (docs/decisions.md, "Code"). A
 * participant that lends sources is asked first and sees none; the others see every source.
 */
export interface ReplyStoreParticipant {
  storeExchange(exchange: StoredExchange, sources: ExchangeSources): ExchangeContribution;
  /** Its part in counting a turn's tokens without a reply; left out: none. */
  countTokens?(counted: CountedTokens, sources: TokenSources): ExchangeContribution;
}

export interface StoresRepliesOptions {
  /** The sources its contribution lends: exactly one participant lends each. */
  lends?: ExchangeSourceName[];
}

const Discoverable = DiscoveryService.createDecorator<StoresRepliesOptions>();

/**
 * Marks a singleton provider as a participant of the statement storing every reply;
 * ReplyParticipants finds it in whichever module provides it.
 */
export function StoresReplies(
  options: StoresRepliesOptions = {},
): <T extends new (...args: never[]) => ReplyStoreParticipant>(target: T) => void {
  return (target) => Discoverable(options)(target);
}
StoresReplies.KEY = Discoverable.KEY;

/** What a reply is admitted with, before the engine is asked. */
export interface AdmittedTurn {
  organizationId: string;
  endUserId: string;
  /** What the engine is sent besides its fixed instructions: the reply's cost is estimated from it. */
  promptTexts: readonly string[];
}

/**
 * One module's admission of one reply (the token budgets' reservation): checked again before
 * each later model call, settled by the statement that stores the reply, or given back.
 */
export interface ReplyAdmission {
  /**
   * Before a later model call of a turn (a later round, or the next route after a billed answer
   * that was no reply): refuses when what it spent leaves no room. `addedPromptTexts`: what that
   * call sends beyond the admitted prompt (the turn's calls and outputs since).
   */
  assertRoomFor(spentTokens: number, addedPromptTexts?: readonly string[]): Promise<void>;
  /** Its steps in the statement storing the exchange (after every source's). */
  storeExchange(exchange: StoredExchange, sources: ExchangeSources): WithEntry[];
  /** Its steps in a statement counting a turn's tokens without a reply. */
  countTokens(counted: CountedTokens, sources: TokenSources): WithEntry[];
  /** The statement storing the exchange committed: its steps settled the admission. */
  settled(): void;
  /** The reply failed or was cancelled: given back. Never throws; once only. */
  release(): void;
}

/** A module that admits every reply (or refuses it, e.g. 402) before the engine is asked. */
export interface ReplyAdmitter {
  admit(turn: AdmittedTurn): Promise<ReplyAdmission>;
}

const DiscoverableAdmitter = DiscoveryService.createDecorator<true>();

/** Marks a singleton provider as one that admits every reply; ReplyParticipants finds it. */
export function AdmitsReplies(): <T extends new (...args: never[]) => ReplyAdmitter>(
  target: T,
) => void {
  return (target) => DiscoverableAdmitter(true)(target);
}
AdmitsReplies.KEY = DiscoverableAdmitter.KEY;
