import type { ReplyContext } from '../common/reply/reply-participant';
import type { PersonalityForReply } from '../personalities/personalities.service';
import type { ToolTurnState } from '../tools/tool-turn-state';
import { toolOutputMessage } from './engine/system-message';
import { promptTextsOf } from './prompt-texts';

const bytes = (texts: readonly string[]) =>
  texts.reduce((sum, text) => sum + Buffer.byteLength(text, 'utf8'), 0);

describe('promptTextsOf (what a reply’s cost is estimated from)', () => {
  const personality = {
    description: 'A helpful shop assistant.',
    systemPrompt: null,
    tools: [],
  } as unknown as PersonalityForReply;
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
    const withoutTools = promptTextsOf(personality, context, 'Is it in stock?', {
      ...resumed,
      results: [],
      round: { calls: [], outputs: {} },
    });
    expect(bytes(promptTextsOf(personality, context, 'Is it in stock?', resumed))).toBeGreaterThan(
      bytes(withoutTools) + bytes(sent),
    );
  });
});
