import { DiscoveryService } from '@nestjs/core';
import type { MemorySafety } from '../safety/safety-categories';
import type { EngineReply, EngineToolCall, ReplyRequest } from './engine/response-engine';

/** One reply being written: the engine's request as it stands, and where its text streams. */
export interface Generation {
  organizationId: string;
  /** The engine's request without what the engine call adds (its tools, signal and stream). */
  request: Omit<ReplyRequest, 'signal' | 'onDelta' | 'tools' | 'toolResults'>;
  /** The client's: aborted when it goes away. */
  signal: AbortSignal;
  /** Receives the reply's text piece by piece (a streamed call); awaited before reading on. */
  onDelta?: (text: string) => Promise<void>;
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

const Discoverable = DiscoveryService.createDecorator<true>();

/**
 * Marks a singleton provider as a participant wrapping every reply's generation; ReplyGenerators
 * finds it in whichever module provides it. Participants nest by class name, the first outermost.
 */
export function GeneratesReplies(): <T extends new (...args: never[]) => ReplyGenerator>(
  target: T,
) => void {
  return (target) => Discoverable(true)(target);
}
GeneratesReplies.KEY = Discoverable.KEY;
