import type {
  ReplyHistoryMessage,
  ReplyRecalledMessage,
} from '../../common/reply/reply-participant';
import type { PersonalityForReply } from '../../personalities/personalities.service';
import type { EmotionVocabulary } from '../../vocabularies/entities/emotion-vocabulary.entity';

/** Injection token of the engine that writes replies (RESPONSE_ENGINE picks the class). */
export const RESPONSE_ENGINE = Symbol('RESPONSE_ENGINE');

/** A message of the conversation so far, as the reply's participants read it. */
export type EngineMemory = ReplyHistoryMessage;

/** An older memory recalled for this message, with when it was said (ISO 8601). */
export type RecalledEngineMemory = ReplyRecalledMessage;

/** A chunk of a knowledge document, under its document's title. */
export interface KnowledgeChunkForReply {
  title: string;
  text: string;
}

/** A tool the engine may call this round (contract §26): its name, purpose and arguments' schema. */
export interface EngineTool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/**
 * The most tool calls one round may ask for: a paused turn is resumed with one output each
 * (ToolOutputsDto takes this many). A provider's answer with more is refused as no reply; the
 * local engine takes the first this many its message writes.
 */
export const MAX_TOOL_CALLS_PER_ROUND = 64;

/** The longest call id a resumption may answer (ToolOutputDto's `tool_call_id`). */
export const TOOL_CALL_ID_MAX_CHARACTERS = 200;

/**
 * A call's name as a reply keeps it, at most: a tool's is 64 characters of [A-Za-z0-9_-], but the
 * model may call a tool the turn does not have by any name (told "no such tool"), and the reply
 * keeps that name, cut here.
 */
export const TOOL_CALL_NAME_MAX_CHARACTERS = 200;

/** A call of a tool the engine asks for; `arguments` as the model wrote them, not yet checked. */
export interface EngineToolCall {
  id: string;
  name: string;
  arguments: unknown;
}

/** A call of an earlier round of this turn, with what it gave back. */
export interface EngineToolResult {
  call: EngineToolCall;
  output: unknown;
  /** On a round's first call: what the model wrote beside its calls, given back to it. */
  said?: string;
}

export interface ReplyRequest {
  personality: PersonalityForReply;
  message: string;
  /** The latest exchanges of this user with this personality, oldest first. */
  memories: EngineMemory[];
  /** Every fact known about the end user, oldest first (shared by all personalities). */
  facts: string[];
  /** Older memories of this user with this personality most relevant to the message. */
  recalled: RecalledEngineMemory[];
  /** Chunks of the personality's knowledge documents most relevant to the message. */
  knowledge?: KnowledgeChunkForReply[];
  /** The message expresses suicidal ideation or self-harm: the reply must answer with care. */
  crisis: boolean;
  vocabulary: EmotionVocabulary;
  /** Aborted when the client goes away or the time limit passes: the engine stops at once. */
  signal: AbortSignal;
  /**
   * Receives the reply's text piece by piece, in order, as it is produced; the engine waits for
   * it before it reads on, so a client that does not read pauses the provider's stream.
   */
  onDelta?: (text: string) => Promise<void>;
  /** Tools the engine may call this round; none: it must answer. */
  tools?: EngineTool[];
  /** The calls of the turn's earlier rounds with their outputs, in order. */
  toolResults?: EngineToolResult[];
  /**
   * Told of a call the provider bills that the reply's own usage leaves out, with its tokens and
   * the model asked: an answer that came and could not be used (a refusal, an empty text, one
   * past ENGINE_MAX_TOKENS; its reported count, or an estimate), whether a later route answers
   * or not; a streamed call that failed or was cancelled (the client left, the time ran out)
   * after its text reached the client, whose count, the stream's last chunk, never came (an
   * estimate); and a call cancelled before anything came, whose prompt the provider read (an
   * estimate of the prompt alone).
   */
  onUncountedSpend?: (spent: TokenUsage, model: string) => void;
  /**
   * Asked before a further call of this reply once an earlier one was billed (onUncountedSpend)
   * and gave no reply: refuses (402 `budget_exceeded`) when the turn's tokens so far leave no
   * room, as before each later round of a turn with tools. Without it, the call goes unchecked.
   */
  roomForAnotherCall?: () => Promise<void>;
}

export interface EmotionReading {
  name: string;
  intensity: number;
}

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  /** Of the prompt tokens, those the provider served from its prompt cache (0 when unreported). */
  cachedTokens: number;
}

export interface EngineReply {
  text: string;
  emotion: EmotionReading;
  /** The emotion detected in the user's message, stored with it. */
  detected: EmotionReading;
  /** What the provider reported it used; null for engines that use none. */
  usage: TokenUsage | null;
  /** The model asked for on the route that wrote the reply; null for the local engine. */
  model: string | null;
  /**
   * Facts newly stated by the user in this message, as short third-person statements (at most
   * MAX_LEARNED_FACTS, each one line of at most LEARNED_FACT_MAX_CHARACTERS); stored with the exchange.
   */
  facts: string[];
  /** Tools the engine calls before it answers; when given, `text` is not a reply. */
  toolCalls?: EngineToolCall[];
}

/** Facts an engine may learn from one message. */
export const MAX_LEARNED_FACTS = 3;

export interface ResponseEngine {
  /** `local` or `openai`: the engine label of logs and metrics. */
  readonly name: string;
  /**
   * The complete reply. Throws `AppError` 502 `engine_unavailable` when the provider fails and
   * 504 `engine_timeout` when it gives no complete reply in time; rejects with the signal's
   * reason once it is aborted.
   */
  reply(request: ReplyRequest): Promise<EngineReply>;
}
