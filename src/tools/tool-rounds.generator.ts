import { Injectable } from '@nestjs/common';
import {
  type Generated,
  type Generation,
  GeneratesReplies,
  type NextGeneration,
  type ReplyGenerator,
} from '../respond/reply-generation';
import { toolResultTexts } from '../respond/prompt-texts';
import { ROUND_SEPARATOR, saidInRounds } from './tool-turn-state';
import { ToolTurnsService } from './tool-turns.service';

/**
 * Tools' part in every reply (contract §26, docs/tools.md): the generation inside it runs in as
 * many rounds as the turn's tools take, each later round admitted again for what the turn spent
 * so far, and a call the client owes pauses the turn.
 */
@Injectable()
// Inside safety's screening (order 100): screened once, not once per round.
@GeneratesReplies({ order: 200 })
export class ToolRounds implements ReplyGenerator {
  constructor(private readonly turns: ToolTurnsService) {}

  async generate(generation: Generation, next: NextGeneration): Promise<Generated> {
    const { turn, signal, request, onDelta } = generation;
    // What the model said before a pause was streamed in the paused turn's own response.
    const roundsSaidBefore = saidInRounds(turn.state).length;
    // The calls and outputs the turn had when admitted are in its estimate already.
    const resultsAdmitted = turn.state.results.length;
    /** The budgets' check before a later model call: what the turn spent, what its prompt grew by. */
    const roomForNextCall = async () => {
      const spent = turn.state.usage;
      if (!spent) return;
      await turn.assertRoomFor(
        spent.promptTokens + spent.completionTokens,
        toolResultTexts(turn.state.results.slice(resultsAdmitted)),
      );
    };
    const outcome = await this.turns.run(
      {
        organizationId: generation.organizationId,
        endUserId: turn.endUserId,
        userId: turn.userId,
        personalityId: request.personality.id,
        personalityTools: request.personality.tools,
        state: turn.state,
        signal,
        tokenSteps: (usage, model, at) => turn.tokenSteps(usage, model, at),
        beforePause: generation.beforePause,
        crisis: request.crisis,
      },
      async (tools) => {
        await roomForNextCall();
        const saidHere = saidInRounds(turn.state).length > roundsSaidBefore;
        const round = await next({
          ...generation,
          // And before the next route, when a route's answer was billed and was no reply.
          request: { ...request, ...tools, roomForAnotherCall: roomForNextCall },
          onDelta: onDelta && saidHere ? separatedFromEarlierRounds(onDelta) : onDelta,
        });
        // Nothing inside the rounds pauses a turn: only they do.
        if (round.kind !== 'reply') throw new Error('A generation inside tool rounds paused');
        return round.reply;
      },
    );
    if (outcome.kind === 'paused') {
      return { kind: 'paused', turnId: outcome.turnId, toolCalls: outcome.toolCalls };
    }
    return { kind: 'reply', reply: outcome.reply, engineAsked: true, toolCalls: outcome.toolCalls };
  }
}

/** The stream of a round after one in which the model said something: a blank line apart. */
function separatedFromEarlierRounds(
  onDelta: (text: string) => Promise<void>,
): (text: string) => Promise<void> {
  let first = true;
  return (text) => {
    const delta = first ? `${ROUND_SEPARATOR}${text}` : text;
    first = false;
    return onDelta(delta);
  };
}
