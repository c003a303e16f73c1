import { Inject, Injectable } from '@nestjs/common';
import type { PersonalityVoice } from '../personalities/entities/personality-definition';
import {
  inCanonicalOrder,
  type MemorySafety,
  type SafetyAction,
  SAFETY_CLASSIFIER,
  type SafetyCategory,
  type SafetyClassifier,
} from './safety-categories';
import { type AppliedSafetySettings, SafetySettingsService } from './safety-settings.service';
import { SentenceGate } from './sentence-gate';

/** What moderation acts on; `self_harm` is the crisis response's. */
const MODERATED: SafetyCategory[] = ['sexual_minors', 'violence'];

/** How the safety of one message was decided, before the engine is asked. */
export interface MessageSafety {
  settings: AppliedSafetySettings;
  /** The message's verdict, as its memory keeps it. */
  verdict: MemorySafety;
  /**
   * The reply ends with the crisis message, whatever answers: the engine, told to answer with
   * care, or a refusal (a person in crisis is referred even when their message or the reply is
   * blocked).
   */
  crisis: boolean;
  /** The message is not sent to the engine; a refusal answers. */
  blocked: boolean;
}

/** The verdict of a whole exchange, as the answer and the `done` event carry it. */
export type ExchangeSafety = MemorySafety;

const ACTION_RANK: Record<SafetyAction, number> = {
  none: 0,
  flagged: 1,
  crisis_response: 2,
  blocked: 3,
};

/** The strongest action a message or a reply took: a refusal, then a referral, then a flag. */
function actionOf(blocked: boolean, crisis: boolean, categories: SafetyCategory[]): SafetyAction {
  if (blocked) return 'blocked';
  if (crisis) return 'crisis_response';
  return categories.length > 0 ? 'flagged' : 'none';
}

function verdictOf(categories: SafetyCategory[], action: SafetyAction): MemorySafety {
  return { flagged: categories.length > 0 || action !== 'none', categories, action };
}

/**
 * Safety in companion conversations (contract §22, docs/safety.md): the organization's settings
 * applied to a user's message before the engine sees it, and to the reply before the end user
 * does, streamed replies included.
 */
@Injectable()
export class ReplySafety {
  constructor(
    private readonly settings: SafetySettingsService,
    @Inject(SAFETY_CLASSIFIER) private readonly classifier: SafetyClassifier,
  ) {}

  /**
   * The message's verdict under the organization's settings. Nothing is classified when every
   * check is off; with input moderation off, only self-harm is reported.
   */
  async screenMessage(
    organizationId: string,
    message: string,
    signal: AbortSignal,
  ): Promise<MessageSafety> {
    const settings = await this.settings.forReply(organizationId);
    const checksInput = settings.inputModeration !== 'off';
    if (!settings.crisisResponse && !checksInput && settings.outputModeration === 'off') {
      return { settings, verdict: verdictOf([], 'none'), crisis: false, blocked: false };
    }
    const found = (await this.classifier.classify(message, { signal })).categories;
    const categories = found.filter(
      (category) => category === 'self_harm' || (checksInput && MODERATED.includes(category)),
    );
    const blocked =
      settings.inputModeration === 'block' &&
      categories.some((category) => MODERATED.includes(category));
    const crisis = settings.crisisResponse && categories.includes('self_harm');
    return {
      settings,
      verdict: verdictOf(categories, actionOf(blocked, crisis, categories)),
      crisis,
      blocked,
    };
  }

  /** The moderated categories of a reply's text; none when output moderation is off. */
  async screenReply(
    settings: AppliedSafetySettings,
    text: string,
    signal: AbortSignal,
  ): Promise<SafetyCategory[]> {
    if (settings.outputModeration === 'off') return [];
    const { categories } = await this.classifier.classify(text, { signal });
    return categories.filter((category) => MODERATED.includes(category));
  }

  /**
   * For a streamed reply under output moderation `block`: releases the reply a sentence at a
   * time, each once it is checked together with the sentences released before it; a sentence
   * that puts the reply in a moderated category stops it. Blocks whatever `screenReply` of the
   * whole reply would (contract §29; the bound on what a check reads is SentenceGate's).
   */
  gate(
    settings: AppliedSafetySettings,
    signal: AbortSignal,
    release: (text: string) => Promise<void>,
    onBlocked: (categories: SafetyCategory[]) => void,
    releasedBefore?: string,
  ): SentenceGate {
    return new SentenceGate({
      releasedBefore,
      check: async (sentence, context) => {
        // What was released is clean: a sentence that cannot change that is not read with it.
        // (Text released before the gate may not be; the gate's end then reads the whole reply.)
        if (this.classifier.couldFlagAfter?.(sentence, context) === false) return 'allow';
        const categories = await this.screenReply(settings, context + sentence, signal);
        if (categories.length === 0) return 'allow';
        onBlocked(categories);
        return 'block';
      },
      release,
    });
  }

  /** The reply's verdict, given what its message's verdict decided and what the reply holds. */
  replyVerdict(message: MessageSafety, replyCategories: SafetyCategory[]): MemorySafety {
    const blocked = message.settings.outputModeration === 'block' && replyCategories.length > 0;
    // A crisis reply, refused or not, ends with the crisis message: its verdict says self_harm.
    const categories = message.crisis
      ? inCanonicalOrder(['self_harm', ...replyCategories])
      : replyCategories;
    return verdictOf(categories, actionOf(blocked, message.crisis, categories));
  }

  /** The exchange's: every category either found, and the strongest action either took. */
  exchangeVerdict(message: MemorySafety, reply: MemorySafety): ExchangeSafety {
    const action =
      ACTION_RANK[reply.action] > ACTION_RANK[message.action] ? reply.action : message.action;
    return verdictOf(inCanonicalOrder([...message.categories, ...reply.categories]), action);
  }
}

/** The short refusal that replaces a blocked message's reply, in the personality's register. */
export function refusalIn(voice: PersonalityVoice): string {
  switch (voice.formality) {
    case 'casual':
      return "I can't go there with you. Let's talk about something else?";
    case 'formal':
      return 'I am sorry, but I cannot discuss that. Perhaps we could talk about something else.';
    default:
      return "I can't help with that. Could we talk about something else?";
  }
}

/** The crisis message, as it ends a crisis reply (a paragraph of its own). */
export function withCrisisMessage(text: string, settings: AppliedSafetySettings): string {
  return `${text.trimEnd()}\n\n${settings.crisisMessage}`;
}
