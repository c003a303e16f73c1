import { DiscoveryService } from '@nestjs/core';
import type { WithEntry } from '../database/sql';
import type { MemorySafety } from '../safety/safety-categories';
import type { ToolTurnState } from '../tools/tool-turn-state';
import type {
  EngineReply,
  EngineToolCall,
  ReplyRequest,
  TokenUsage,
} from './engine/response-engine';

/** The turn a generation answers, for the participants that make more than one model call. */
export interface GenerationTurn {
  endUserId: string;
  userId: string;
  /** Where the turn stands (contract §26): fresh, or resumed from a pause with tool outputs. */
  state: ToolTurnState;
  /**
   * Refuses (402) a further model call once the turn has spent `tokens` so far; the call is
   * estimated as the admitted one plus `addedPromptTexts` (the turn's calls and outputs since).
   */
  assertRoomFor(tokens: number, addedPromptTexts?: readonly string[]): Promise<void>;
  /** The steps counting tokens the turn spent with no reply stored yet (written with a pause). */
  tokenSteps(usage: TokenUsage, model: string | null, at: Date): WithEntry[];
}

/** One reply being written: the engine's request as it stands, and where its text streams. */
export interface Generation {
  organizationId: string;
  turn: GenerationTurn;
  /** The engine's request without its signal and stream, which the generation carries. */
  request: Omit<ReplyRequest, 'signal' | 'onDelta'>;
  /** The client's: aborted when it goes away. */
  signal: AbortSignal;
  /** Receives the reply's text piece by piece (a streamed call); awaited before reading on. */
  onDelta?: (text: string) => Promise<void>;
  /**
   * Awaited before a turn's pause for client tools is saved: what a participant settles of the
   * stream first (safety ends its sentence gate, and keeps its verdict with the turn).
   */
  beforePause?: () => Promise<void>;
}

/** The verdicts a reply is stored and answered with (docs/safety.md). */
export interface ReplyVerdicts {
  message: MemorySafety;
  reply: MemorySafety;
  /** The exchange's: what the answer and a flag report. */
  exchange: MemorySafety;
}

export const NO_VERDICT: MemorySafety = { flagged: false, categories: [], action: 'none' };

/** A complete reply, as the engine wrote it or as a participant answered in its place. */
export interface GeneratedReply {
  kind: 'reply';
  reply: EngineReply;
  /** False when a participant answered without asking the engine: then nothing is cited. */
  engineAsked: boolean;
  /** The turn's tool calls, kept with the reply. */
  toolCalls: unknown[];
  /** Left out: nothing was screened (every verdict none). */
  verdicts?: ReplyVerdicts;
}

/** A turn the engine paused for client tools (contract §26): nothing is stored yet. */
export interface PausedGeneration {
  kind: 'paused';
  turnId: string;
  toolCalls: EngineToolCall[];
}

export type Generated = GeneratedReply | PausedGeneration;

/** The rest of the chain: the participants inside this one, and the engine at its heart. */
export type NextGeneration = (generation: Generation) => Promise<Generated>;

/**
 * A module's part in writing every reply: it wraps the engine's call (and those inside it), may
 * change the request and the stream on the way in and the reply on the way out, or answer in the
 * engine's place without calling `next`.
 */
export interface ReplyGenerator {
  generate(generation: Generation, next: NextGeneration): Promise<Generated>;
}

/** Where a participant wraps the others: a lower `order` wraps a higher one. */
export interface GenerationPlace {
  order: number;
}

const Discoverable = DiscoveryService.createDecorator<GenerationPlace>();

/**
 * Marks a singleton provider as a participant wrapping every reply's generation; ReplyGenerators
 * finds it in whichever module provides it. Participants nest by `order`, the lowest outermost,
 * then by class name: what wraps what is stated where it matters, not left to names.
 */
export function GeneratesReplies(
  place: GenerationPlace,
): <T extends new (...args: never[]) => ReplyGenerator>(target: T) => void {
  return (target) => Discoverable(place)(target);
}
GeneratesReplies.KEY = Discoverable.KEY;
