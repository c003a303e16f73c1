import type { PersonalityForReply } from '../../personalities/personalities.service';
import type { RecalledEngineMemory } from './response-engine';

/** Told for a message the safety checks read as suicidal ideation or self-harm (docs/safety.md). */
export const CRISIS_GUIDANCE =
  'The user may be in crisis: this message expresses thoughts of suicide or self-harm. Answer ' +
  'with warmth and care, stay with them, take what they say seriously, never describe methods ' +
  'or judge, and gently encourage them to reach out to someone they trust and to a crisis line. ' +
  'Keep your reply short; a message with crisis lines will follow it.';

/**
 * The system message of a reply (docs/memory.md shows one). Its stable part comes first and
 * changes only when the personality, the vocabulary or the facts change, so that providers'
 * prompt caching applies to it; what changes with every message (the memories recalled for it)
 * comes last.
 */
export function systemMessage(
  personality: PersonalityForReply,
  emotions: string[],
  facts: string[],
  recalled: RecalledEngineMemory[],
  crisis = false,
): string {
  const { voice } = personality;
  const parts = [
    `You are ${personality.name}. ${personality.description}`,
    `Traits: ${personality.traits.join(', ')}.`,
    `Voice: ${voice.tone}; ${voice.formality} register. ${voice.style_notes}`,
    personality.systemPrompt,
    'Answer with a JSON object: "text" is your reply to the user; "emotion" is the emotion your ' +
      `reply expresses, one of: ${emotions.join(', ')}; "intensity" is how strongly, from 0 to 1; ` +
      '"facts" lists, as short third-person statements ("Their dog is called Rex."), at most 3 ' +
      'durable facts about themselves that the user states for the first time in this message ' +
      '(none: an empty list).',
  ];
  if (facts.length > 0) {
    parts.push(`What you know about the user:\n${facts.map((fact) => `- ${fact}`).join('\n')}`);
  }
  if (recalled.length > 0) {
    const lines = recalled.map(
      (memory) =>
        `- ${memory.created_at.slice(0, 10)}, ${memory.role === 'user' ? 'the user' : 'you'}: ${memory.content}`,
    );
    parts.push(`Earlier in your conversations, relevant to this message:\n${lines.join('\n')}`);
  }
  if (crisis) parts.push(CRISIS_GUIDANCE);
  return parts.join('\n\n');
}
