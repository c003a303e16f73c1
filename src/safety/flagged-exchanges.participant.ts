import { Injectable } from '@nestjs/common';
import {
  type ExchangeContribution,
  type ExchangeSources,
  type ReplyStoreParticipant,
  type StoredExchange,
  StoresReplies,
} from '../common/reply/reply-store';
import { flaggedExchangeSteps } from './flagged-exchange.step';

/**
 * Safety's part in storing a reply: a flagged exchange's audit event and `conversation.flagged`
 * webhook event, in the statement that stores it.
 */
@Injectable()
@StoresReplies()
export class FlaggedExchanges implements ReplyStoreParticipant {
  storeExchange(exchange: StoredExchange, sources: ExchangeSources): ExchangeContribution {
    const { safety, message } = exchange;
    if (!safety.flagged) return { steps: [] };
    return {
      steps: flaggedExchangeSteps(sources.memories, {
        caller: exchange.caller,
        userId: exchange.userId,
        personalityId: exchange.personalityId,
        // The message that was flagged: the user's, unless only the reply was.
        role: message.safety.flagged ? 'user' : 'personality',
        safety,
        at: exchange.at,
      }),
    };
  }
}
