import type { ReplyContext } from '../common/reply/reply-participant';
import type { PersonalityForReply } from '../personalities/personalities.service';
import type { ToolTurnState } from '../tools/tool-turn-state';
import { toolOutputMessage } from './engine/system-message';

/**
 * What the engine is sent besides its fixed instructions: the reply's cost is estimated from it
 * (one token per byte, SpendService#estimate). A turn with tools sends their definitions on each
 * call, and a resumed one the calls of its rounds so far and each output as the tool message the
 * engine writes (under its preamble, in its data block): the output's JSON alone left out about
 * 330 bytes a call and the escaping (found by review).
 */
export function promptTextsOf(
  personality: PersonalityForReply,
  context: ReplyContext,
  message: string,
  tools: ToolTurnState,
): string[] {
  return [
    personality.description,
    personality.systemPrompt ?? '',
    message,
    personality.tools.length > 0 ? JSON.stringify(personality.tools) : '',
    tools.requestTools.length > 0 ? JSON.stringify(tools.requestTools) : '',
    ...tools.results.map(({ call, said }) => JSON.stringify({ call, said })),
    ...tools.results.map(({ output }) => toolOutputMessage(output)),
    tools.round.calls.length > 0
      ? JSON.stringify({ calls: tools.round.calls, said: tools.round.said })
      : '',
    ...Object.values(tools.round.outputs).map(toolOutputMessage),
    ...context.history.map((memory) => memory.content),
    ...context.facts,
    ...context.recalled.map((memory) => memory.content),
    ...context.knowledge.flatMap((chunk) => [chunk.title, chunk.text]),
  ];
}
