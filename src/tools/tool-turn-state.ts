import type {
  EngineToolCall,
  EngineToolResult,
  TokenUsage,
} from '../respond/engine/response-engine';
import type { SafetyCategory } from '../safety/safety-categories';
import type { RequestTool } from './tool-definitions';

/** A tool call as the reply's memory keeps it (contract §26). */
export interface ToolCallRecord {
  id: string;
  name: string;
  arguments: unknown;
  output: unknown;
  execution: 'client' | 'webhook';
  duration_ms: number | null;
  error: string | null;
}

/** Where a turn with tools stands: what a paused turn keeps, and what a resumption goes on from. */
export interface ToolTurnState {
  /** `turn_` + ULID: the paused turn's id, and `turn_id` of its webhook tools' calls. */
  turnId: string;
  /** The end user's (the business's) user_id, to resume the conversation with. */
  userId: string;
  /** The end user's message, stored only once the turn completes. */
  message: string;
  /** Client tools sent with the request, which join the personality's for the whole turn. */
  requestTools: RequestTool[];
  /**
   * The calls of the rounds completed, with their outputs, in order; a round's first call carries
   * what the model wrote beside its calls (streamed to the client as it came).
   */
  results: EngineToolResult[];
  /**
   * The paused round: its calls in order, the outputs already known (not the client's), and what
   * the model wrote beside them.
   */
  round: { calls: EngineToolCall[]; outputs: Record<string, unknown>; said?: string };
  /** The ids of the calls the client owes an output for. */
  pending: string[];
  /** Model calls that called tools so far. */
  rounds: number;
  /**
   * Tokens of the turn's model calls not counted yet (those before a pause were counted with it);
   * null: none.
   */
  usage: TokenUsage | null;
  /** The model that made the last call. */
  model: string | null;
  records: ToolCallRecord[];
  /**
   * What a streamed pause's sentence gate refused of what the model said before the pause (never
   * sent): the resumption answers with the refusal, without asking the model again. [] when the
   * gate let it all through; absent when no gate read it.
   */
  refused?: SafetyCategory[];
}

/** Between what the model said in two rounds of a turn, in the reply and in its stream. */
export const ROUND_SEPARATOR = '\n\n';

/** What the model wrote beside its calls in the turn's rounds so far, in order (the paused one last). */
export function saidInRounds(state: Pick<ToolTurnState, 'results' | 'round'>): string[] {
  const said = state.results.flatMap((result) => (result.said ? [result.said] : []));
  return state.round.said ? [...said, state.round.said] : said;
}

/**
 * What the turn's reply begins with before its next round's text: what the model said in the
 * rounds so far, each followed by ROUND_SEPARATOR; '' when it said nothing.
 */
export function saidSoFar(state: Pick<ToolTurnState, 'results' | 'round'>): string {
  return saidInRounds(state)
    .map((text) => text + ROUND_SEPARATOR)
    .join('');
}
