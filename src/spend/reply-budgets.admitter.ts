import { Injectable } from '@nestjs/common';
import {
  type AdmittedTurn,
  AdmitsReplies,
  type CountedTokens,
  type ExchangeSources,
  type ReplyAdmission,
  type ReplyAdmitter,
  type SpentTokens,
  type StoredExchange,
  type TokenSources,
} from '../common/reply/reply-store';
import { SpendService } from './spend.service';

const total = (tokens: SpentTokens | null) =>
  tokens ? tokens.promptTokens + tokens.completionTokens : 0;

/**
 * Spend's part in every reply (docs/spend-control.md): admitted against the token budgets before
 * the provider is asked (402 over a budget), checked again before each later round of a turn
 * with tools, and settled by the statement that stores the reply or given back.
 */
@Injectable()
@AdmitsReplies()
export class ReplyBudgets implements ReplyAdmitter {
  constructor(private readonly spend: SpendService) {}

  async admit(turn: AdmittedTurn): Promise<ReplyAdmission> {
    const { spend } = this;
    const admission = await spend.admit(turn);
    return {
      assertRoomFor: (spentTokens: number, addedPromptTexts?: readonly string[]) =>
        spend.assertRoomFor(admission, turn.endUserId, spentTokens, addedPromptTexts),
      storeExchange: (exchange: StoredExchange, sources: ExchangeSources) =>
        spend.exchangeSteps(admission, {
          at: exchange.at,
          relationship: sources.relationship,
          tokens: sources.tokens,
          tokensUsed: total(exchange.tokens),
        }).steps,
      countTokens: (counted: CountedTokens, sources: TokenSources) =>
        spend.tokenSteps(admission, {
          at: counted.at,
          tokens: sources.tokens,
          tokensUsed: total(counted.tokens),
        }),
      settled: () => spend.settled(admission),
      release: () => spend.release(admission),
    };
  }
}
