import { Injectable } from '@nestjs/common';
import { detectEmotion } from '../respond/engine/emotion-detector';
import type { EngineReply } from '../respond/engine/response-engine';
import {
  type Generated,
  type GeneratedReply,
  type Generation,
  GeneratesReplies,
  type NextGeneration,
  type ReplyGenerator,
} from '../respond/reply-generation';
import {
  type MessageSafety,
  refusalIn,
  ReplySafety,
  withCrisisMessage,
} from './reply-safety.service';
import { inCanonicalOrder, type SafetyCategory } from './safety-categories';
import { saidSoFar } from '../tools/tool-turn-state';

/**
 * A refusal in the personality's register, in place of the engine's reply; a crisis is still
 * referred (it ends with the crisis message).
 */
function refusalReply(generation: Generation, screened: MessageSafety): EngineReply {
  const { vocabulary, message, personality } = generation.request;
  const detected = detectEmotion(message, vocabulary.emotions);
  const neutral = vocabulary.emotions.some((emotion) => emotion.name === 'neutral')
    ? 'neutral'
    : detected.name;
  return {
    text: screened.crisis
      ? withCrisisMessage(refusalIn(personality.voice), screened.settings)
      : refusalIn(personality.voice),
    emotion: { name: neutral, intensity: 0.3 },
    detected: { name: detected.name, intensity: detected.intensity },
    usage: null,
    facts: [],
    model: null,
  };
}

/**
 * Safety's part in every reply (contract §22, docs/safety.md): the message screened under the
 * organization's settings before the engine sees it (a blocked one is refused in the engine's
 * place), the engine told of a crisis, the reply screened before the end user sees it (streamed,
 * sentence by sentence) and refused or referred, and the verdicts it is stored with.
 */
@Injectable()
// Outermost: the message is screened once before everything the turn does, the final reply once.
@GeneratesReplies({ order: 100 })
export class ScreenedReplies implements ReplyGenerator {
  constructor(private readonly safety: ReplySafety) {}

  async generate(generation: Generation, next: NextGeneration): Promise<Generated> {
    const { signal, onDelta } = generation;
    const screened = await this.safety.screenMessage(
      generation.organizationId,
      generation.request.message,
      signal,
    );
    if (screened.blocked) return this.refusedAtOnce(generation, screened, []);
    const { settings } = screened;
    // A resumed turn's reply begins with what the model said before its pause (ToolRounds),
    // streamed in the paused turn's response: this stream's gate reads it as released context.
    const saidBefore = saidSoFar(generation.turn.state);
    // What the paused stream's gate refused was never sent: the resumption is the refusal, and
    // the model is not asked again (its answer could not change that). Text no gate read (a
    // pause answered without streaming, or before `block` was on) is screened once now, so that
    // this stream's gate may take it for clean context.
    const { refused } = generation.turn.state;
    const refusedBefore =
      refused ??
      (saidBefore && settings.outputModeration === 'block'
        ? await this.safety.screenReply(settings, saidBefore, signal)
        : []);
    if (settings.outputModeration === 'block' && refusedBefore.length > 0) {
      return this.refusedAtOnce(generation, screened, refusedBefore);
    }
    let blockedCategories: SafetyCategory[] = [];
    const gate =
      onDelta && settings.outputModeration === 'block'
        ? this.safety.gate(
            settings,
            signal,
            onDelta,
            (categories) => {
              blockedCategories = categories;
            },
            saidBefore,
          )
        : undefined;
    const generated = await next({
      ...generation,
      request: { ...generation.request, crisis: screened.crisis },
      onDelta: gate ? async (text: string) => void (await gate.push(text)) : onDelta,
      // What was said before the calls is released now if clean; if not, it is never sent, and
      // the verdict is saved with the turn for its resumption (above). Without a gate nothing
      // read it: a verdict of an earlier pause of the turn no longer covers it.
      beforePause: async () => {
        generation.turn.state.refused = gate
          ? (await gate.end()) === 'blocked'
            ? blockedCategories
            : []
          : undefined;
      },
    });
    if (generated.kind === 'paused') return generated;
    let { reply } = generated;
    const screenedNow = gate
      ? (await gate.end()) === 'blocked'
        ? blockedCategories
        : []
      : await this.safety.screenReply(settings, reply.text, signal);
    // Refused before the pause under block, resumed under flag: still flagged for it.
    const categories =
      settings.outputModeration === 'off' || refusedBefore.length === 0
        ? screenedNow
        : inCanonicalOrder([...screenedNow, ...refusedBefore]);
    if (settings.outputModeration === 'block' && categories.length > 0) {
      // The tokens were spent: the refusal keeps the engine's usage and model.
      const refusal = refusalReply(generation, screened);
      await onDelta?.(gate ? `\n\n${refusal.text}` : refusal.text);
      reply = { ...reply, text: refusal.text, emotion: refusal.emotion, facts: [] };
    } else if (screened.crisis) {
      const text = withCrisisMessage(reply.text, settings);
      await onDelta?.(text.slice(reply.text.trimEnd().length));
      reply = { ...reply, text };
    }
    return this.withVerdicts({ ...generated, reply }, screened, categories);
  }

  /**
   * The refusal in the engine's place, without asking it: a blocked message, or a resumed turn
   * whose earlier text was refused. A resumed turn's tool calls (the client's outputs among them)
   * are kept with it.
   */
  private async refusedAtOnce(
    generation: Generation,
    screened: MessageSafety,
    replyCategories: SafetyCategory[],
  ): Promise<GeneratedReply> {
    const reply = refusalReply(generation, screened);
    await generation.onDelta?.(reply.text);
    return this.withVerdicts(
      { kind: 'reply', reply, engineAsked: false, toolCalls: generation.turn.state.records },
      screened,
      replyCategories,
    );
  }

  private withVerdicts(
    generated: GeneratedReply,
    screened: MessageSafety,
    replyCategories: SafetyCategory[],
  ): GeneratedReply {
    const message = screened.verdict;
    const reply = this.safety.replyVerdict(screened, replyCategories);
    return {
      ...generated,
      verdicts: { message, reply, exchange: this.safety.exchangeVerdict(message, reply) },
    };
  }
}
