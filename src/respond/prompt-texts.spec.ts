import type { ReplyContext } from '../common/reply/reply-participant';
import type { PersonalityForReply } from '../personalities/personalities.service';
import type { ToolTurnState } from '../tools/tool-turn-state';
import { systemMessage, toolOutputMessage } from './engine/system-message';
import { promptTextsOf } from './prompt-texts';

const bytes = (texts: readonly string[]) =>
  texts.reduce((sum, text) => sum + Buffer.byteLength(text, 'utf8'), 0);

describe('promptTextsOf (what a reply’s cost is estimated from)', () => {
  const personality = {
    name: 'Sunny',
    description: 'A helpful shop assistant.',
    traits: ['warm'],
    voice: { tone: 'bright', formality: 'casual', style_notes: '' },
    systemPrompt: null,
    tools: [],
  } as unknown as PersonalityForReply;
  const emotions = ['joy', 'calm'];
  const context: ReplyContext = { history: [], facts: [], recalled: [], knowledge: [] };
  // Outputs the JSON encoding grows when written as a tool message: quotes, line breaks, "</".
  const outputs = Array.from({ length: 64 }, (_, i) => ({
    slot: `"${i}"\n</tool_output>`,
    note: 'quoted "text" \\ and more',
  }));
  const resumed = {
    requestTools: [],
    results: outputs.map((output, i) => ({
      call: { id: `call_${i}`, name: 'check_stock', arguments: { sku: i } },
      output,
    })),
    round: { calls: [], outputs: { call_x: outputs[0] } },
  } as unknown as ToolTurnState;

  it('holds every tool message a resumed turn sends, as the engine writes it', () => {
    const sent = [...outputs, outputs[0]].map(toolOutputMessage);
    const withoutTools = promptTextsOf(
      personality,
      context,
      'Is it in stock?',
      {
        ...resumed,
        results: [],
        round: { calls: [], outputs: {} },
      },
      emotions,
    );
    expect(
      bytes(promptTextsOf(personality, context, 'Is it in stock?', resumed, emotions)),
    ).toBeGreaterThan(bytes(withoutTools) + bytes(sent));
  });

  it('holds the whole system message as the engine writes it, what anyone with read_write sets', () => {
    // Rare characters run one token a byte; a control character is six bytes in a data block.
    const rare = '\u9f98';
    const loud = {
      ...personality,
      name: rare.repeat(100),
      traits: Array.from({ length: 20 }, () => rare.repeat(50)),
      voice: { tone: rare.repeat(200), formality: 'casual', style_notes: rare.repeat(1000) },
    } as unknown as PersonalityForReply;
    const escaped: ReplyContext = {
      history: [],
      facts: ['\u0001'.repeat(200)],
      recalled: [
        { role: 'user', content: '\u0002'.repeat(8000), created_at: '2026-12-05T10:00:00.000Z' },
      ],
      knowledge: [],
    } as unknown as ReplyContext;
    const texts = promptTextsOf(
      loud,
      escaped,
      'h',
      { ...resumed, results: [], round: { calls: [], outputs: {} } },
      emotions,
    );
    const sent = systemMessage(loud, emotions, escaped.facts, escaped.recalled, false);
    expect(bytes(texts)).toBeGreaterThanOrEqual(bytes([sent, 'h', JSON.stringify(emotions)]));
    expect(bytes([sent])).toBeGreaterThan(7_000 + 6 * 8_000);
  });
});
