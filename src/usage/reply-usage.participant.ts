import { Injectable } from '@nestjs/common';
import {
  type CountedTokens,
  type ExchangeContribution,
  type ReplyStoreParticipant,
  type StoredExchange,
  StoresReplies,
} from '../common/reply/reply-store';
import { relationshipActivityStep, tokenUsageStep, type TokensUsed } from './usage.steps';

/** Who spent a turn's tokens, for the breakdown's rollups and the budgets. */
function tokensUsed(counted: CountedTokens, replies: 0 | 1): TokensUsed {
  const { caller, organizationId, endUserId, personalityId, at, tokens, endUserErased } = counted;
  return {
    organizationId,
    endUserId,
    personalityId,
    apiKeyId: caller.kind === 'api_key' ? caller.apiKeyId : null,
    at,
    replies,
    endUserErased,
    ...tokens,
  };
}

/**
 * Usage's part in storing a reply: the pair's activity in the month, and the tokens in every
 * rollup (the month's new total lent to the budget's thresholds). A turn without a reply counts
 * its tokens as no request.
 */
@Injectable()
@StoresReplies({ lends: ['relationship', 'tokens'] })
export class ReplyUsage implements ReplyStoreParticipant {
  storeExchange(exchange: StoredExchange): ExchangeContribution {
    const relationship = relationshipActivityStep(exchange);
    const tokens = exchange.tokens
      ? tokenUsageStep(tokensUsed({ ...exchange, tokens: exchange.tokens }, 1))
      : null;
    return {
      steps: tokens ? [relationship, tokens] : [relationship],
      lends: { relationship, tokens },
    };
  }

  countTokens(counted: CountedTokens): ExchangeContribution {
    const tokens = tokenUsageStep(tokensUsed(counted, 0));
    return { steps: [tokens], lends: { tokens } };
  }
}
