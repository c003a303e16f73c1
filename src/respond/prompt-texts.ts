import type { ReplyContext } from '../common/reply/reply-participant';
import type { PersonalityForReply } from '../personalities/personalities.service';
import type { ToolTurnState } from '../tools/tool-turn-state';
import type { EngineToolResult } from './engine/response-engine';
import { systemMessage, toolOutputMessage } from './engine/system-message';

/**
 * What the engine is sent besides the reply format's fixed schema: the reply's cost is estimated
 * from it (one token per byte, SpendService#estimate). The system message is counted as the
 * engine writes it, with the vocabulary's `emotions` (named again in the reply format) and the
 * crisis guidance whether or not it will be sent: the personality's name, traits and voice
 * (2,350 characters anyone with read_write may set, left out until a review overshot a budget
 * by five replies with them), and the facts, memories and passages escaped in their data blocks
 * (a control character is six bytes there). A turn with tools sends their definitions on each
 * call, and a resumed one the calls of its rounds so far and each output as the tool message
 * the engine writes (under its preamble, in its data block): the output's JSON alone left out
 * about 330 bytes a call and the escaping (found by review).
 */
export function promptTextsOf(
  personality: PersonalityForReply,
  context: ReplyContext,
  message: string,
  tools: ToolTurnState,
  emotions: string[],
): string[] {
  return [
    systemMessage(personality, emotions, context.facts, context.recalled, true, context.knowledge),
    JSON.stringify(emotions),
    message,
    personality.tools.length > 0 ? JSON.stringify(personality.tools) : '',
    tools.requestTools.length > 0 ? JSON.stringify(tools.requestTools) : '',
    ...toolResultTexts(tools.results),
    tools.round.calls.length > 0
      ? JSON.stringify({ calls: tools.round.calls, said: tools.round.said })
      : '',
    ...Object.values(tools.round.outputs).map(toolOutputMessage),
    ...context.history.map((memory) => memory.content),
  ];
}

/**
 * What a turn's calls and their outputs add to each later model call's prompt (as promptTextsOf
 * counts them): a later round, or the next route after a billed answer that was no reply, is
 * estimated with them (SpendService#assertRoomFor).
 */
export function toolResultTexts(results: readonly EngineToolResult[]): string[] {
  return [
    ...results.map(({ call, said }) => JSON.stringify({ call, said })),
    ...results.map(({ output }) => toolOutputMessage(output)),
  ];
}
