import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { EmotionDefinition } from '../../vocabularies/entities/emotion-vocabulary.entity';
import type { EngineMemory, EngineReply, ReplyRequest, ResponseEngine } from './response-engine';

const INTENSIFIERS = new Set([
  'so',
  'very',
  'really',
  'extremely',
  'totally',
  'incredibly',
  'super',
]);
const QUOTE_MAX = 80;

export interface DetectedEmotion {
  emotion: EmotionDefinition | undefined;
  name: string;
  intensity: number;
}

/**
 * Finds the emotion of a message from the vocabulary's cues: the emotion with the most cue hits
 * wins (ties: the longer cue, then vocabulary order). Intensity starts at the emotion's arousal
 * and grows with extra hits, intensifiers, exclamation marks and shouting, capped at 1. No hit:
 * "neutral" (when the vocabulary has it) at intensity 0.
 */
export function detectEmotion(message: string, emotions: EmotionDefinition[]): DetectedEmotion {
  const text = ` ${message.toLowerCase().replace(/[’]/g, "'").replace(/\s+/g, ' ')} `;
  let best: { emotion: EmotionDefinition; hits: number; longest: number } | undefined;
  for (const emotion of emotions) {
    let hits = 0;
    let longest = 0;
    for (const cue of emotion.cues) {
      if (containsWord(text, cue.toLowerCase())) {
        hits++;
        longest = Math.max(longest, cue.length);
      }
    }
    if (hits === 0) continue;
    if (!best || hits > best.hits || (hits === best.hits && longest > best.longest)) {
      best = { emotion, hits, longest };
    }
  }
  if (!best) {
    const neutral = emotions.find((emotion) => emotion.name === 'neutral');
    return { emotion: neutral, name: neutral?.name ?? 'neutral', intensity: 0 };
  }
  const words = text.trim().split(' ');
  const intensifiers = words.filter((word) => INTENSIFIERS.has(word)).length;
  const exclamations = (message.match(/!/g) ?? []).length;
  const shouted = message.split(/\s+/).filter((word) => /^[A-Z]{3,}$/.test(word)).length;
  const intensity =
    best.emotion.arousal +
    0.1 * (best.hits - 1) +
    0.08 * Math.min(intensifiers, 3) +
    0.05 * Math.min(exclamations, 3) +
    0.05 * Math.min(shouted, 3);
  return { emotion: best.emotion, name: best.emotion.name, intensity: round(clamp(intensity)) };
}

function containsWord(text: string, cue: string): boolean {
  let from = 0;
  for (;;) {
    const at = text.indexOf(cue, from);
    if (at === -1) return false;
    const before = text[at - 1];
    const after = text[at + cue.length];
    if (!isWordCharacter(before) && !isWordCharacter(after)) return true;
    from = at + 1;
  }
}

function isWordCharacter(character: string | undefined): boolean {
  return character !== undefined && /[\p{L}\p{N}_']/u.test(character);
}

const clamp = (value: number) => Math.min(1, Math.max(0, value));
const round = (value: number) => Math.round(value * 100) / 100;

/** A stable choice among `n` options for this input: same message, same reply. */
function pick<T>(options: T[], seed: string): T {
  const hash = createHash('sha256').update(seed).digest();
  return options[hash.readUInt32BE(0) % options.length];
}

function quote(memory: EngineMemory): string {
  const text = memory.content.replace(/\s+/g, ' ').trim();
  return text.length <= QUOTE_MAX ? text : `${text.slice(0, QUOTE_MAX - 1).trimEnd()}…`;
}

/**
 * The built-in engine: deterministic, local, no network. It reads the emotion of the message
 * with the latest vocabulary, answers with the personality's template for that emotion's
 * valence, greets on a first meeting, and otherwise recalls the user's most recent earlier
 * message. The personality mirrors the detected emotion, a little calmer.
 */
@Injectable()
export class LocalResponseEngine implements ResponseEngine {
  async reply({ personality, message, memories, vocabulary }: ReplyRequest): Promise<EngineReply> {
    const detected = detectEmotion(message, vocabulary.emotions);
    const valence = detected.emotion?.valence ?? 'neutral';
    const seed = `${personality.id}\n${message}\n${memories.length}`;
    const replies = personality.replies;
    const parts: string[] = [];
    const earlier = [...memories].reverse().find((memory) => memory.role === 'user');
    if (memories.length === 0) parts.push(replies.first_meeting);
    parts.push(pick(replies[valence], seed).replaceAll('{emotion}', detected.name));
    if (earlier) parts.push(pick(replies.recall, seed).replaceAll('{memory}', quote(earlier)));
    return {
      text: parts.join(' '),
      emotion: { name: detected.name, intensity: round(detected.intensity * 0.8) },
      detected: { name: detected.name, intensity: detected.intensity },
    };
  }
}
