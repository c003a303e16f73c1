import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { detectEmotion, round } from './emotion-detector';
import { extractFacts } from './fact-extractor';
import { quoteOf } from '../../memory/memory-quote';
import {
  type EngineReply,
  type EngineToolResult,
  MAX_TOOL_CALLS_PER_ROUND,
  type ReplyRequest,
  type ResponseEngine,
} from './response-engine';
import { triggeredCalls } from './tool-trigger';

/** Characters of a tool's output the reply quotes. */
const OUTPUT_QUOTE_MAX = 200;

const CARING_REPLY =
  "I'm really glad you told me, and I'm here with you. What you are feeling matters, and you " +
  "don't have to carry it alone. Would you tell me a little more about what's happening?";

/** A stable choice among `n` options for this input: same message, same reply. */
function pick<T>(options: T[], seed: string): T {
  const hash = createHash('sha256').update(seed).digest();
  return options[hash.readUInt32BE(0) % options.length];
}

function seedOf(personalityId: string, message: string): string {
  return `${personalityId}\n${message}`;
}

/** What a tool gave back, as the local engine mentions it. */
function toolSentence({ call, output }: EngineToolResult): string {
  const text = JSON.stringify(output) ?? 'null';
  const shown = text.length <= OUTPUT_QUOTE_MAX ? text : `${text.slice(0, OUTPUT_QUOTE_MAX - 1)}…`;
  return `(${call.name}: ${shown})`;
}

/**
 * The built-in engine: deterministic, local, no network. It reads the emotion of the message
 * with the latest vocabulary, answers with the personality's template for that emotion's
 * valence, greets on a first meeting, and otherwise recalls an earlier message of the user: the
 * most relevant older one recalled for this message, else the most recent. The personality
 * mirrors the detected emotion, a little calmer. It learns the plain first-person facts of
 * fact-extractor.ts.
 */
@Injectable()
export class LocalResponseEngine implements ResponseEngine {
  readonly name = 'local';

  async reply({
    personality,
    message,
    memories,
    recalled,
    crisis,
    vocabulary,
    signal,
    onDelta,
    tools,
    toolResults,
  }: ReplyRequest): Promise<EngineReply> {
    signal.throwIfAborted();
    const detected = detectEmotion(message, vocabulary.emotions);
    // Tools are called once, in the first round; then the engine answers with their outputs.
    if (tools?.length && !toolResults?.length && !crisis) {
      const calls = triggeredCalls(
        message,
        tools.map((tool) => tool.name),
      ).slice(0, MAX_TOOL_CALLS_PER_ROUND);
      if (calls.length > 0) {
        return {
          text: '',
          emotion: { name: detected.name, intensity: round(detected.intensity * 0.8) },
          detected: { name: detected.name, intensity: detected.intensity },
          usage: null,
          facts: [],
          model: null,
          toolCalls: calls.map((call, index) => ({
            id: `call_${createHash('sha256')
              .update(`${seedOf(personality.id, message)}\n${index}`)
              .digest('hex')
              .slice(0, 24)}`,
            ...call,
          })),
        };
      }
    }
    const valence = detected.emotion?.valence ?? 'neutral';
    const seed = `${personality.id}\n${message}\n${memories.length}`;
    const replies = personality.replies;
    if (crisis) return this.withCare(message, vocabulary, onDelta);
    const parts: string[] = [];
    const earlier =
      recalled.find((memory) => memory.role === 'user') ??
      [...memories].reverse().find((memory) => memory.role === 'user');
    if (memories.length === 0) parts.push(replies.first_meeting);
    parts.push(pick(replies[valence], seed).replaceAll('{emotion}', detected.name));
    if (earlier)
      parts.push(pick(replies.recall, seed).replaceAll('{memory}', quoteOf(earlier.content)));
    for (const result of toolResults ?? []) parts.push(toolSentence(result));
    const text = parts.join(' ');
    // Streamed a word at a time (each with the space before the next), like a model's tokens.
    if (onDelta) for (const piece of text.match(/\S+\s*/g) ?? []) await onDelta(piece);
    return {
      text,
      emotion: { name: detected.name, intensity: round(detected.intensity * 0.8) },
      detected: { name: detected.name, intensity: detected.intensity },
      usage: null,
      facts: extractFacts(message),
      model: null,
    };
  }

  /**
   * A message expressing suicidal ideation or self-harm gets no template nor a quoted memory: a
   * few careful words, which the crisis message follows (docs/safety.md).
   */
  private async withCare(
    message: string,
    vocabulary: ReplyRequest['vocabulary'],
    onDelta: ReplyRequest['onDelta'],
  ): Promise<EngineReply> {
    const detected = detectEmotion(message, vocabulary.emotions);
    const text = CARING_REPLY;
    if (onDelta) for (const piece of text.match(/\S+\s*/g) ?? []) await onDelta(piece);
    const caring = vocabulary.emotions.some((emotion) => emotion.name === 'caring');
    return {
      text,
      emotion: { name: caring ? 'caring' : detected.name, intensity: 0.8 },
      detected: { name: detected.name, intensity: detected.intensity },
      usage: null,
      facts: [],
      model: null,
    };
  }
}
