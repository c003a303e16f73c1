import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import {
  type ExchangeContribution,
  type StoredExchange,
  StoresReplies,
  type ReplyStoreParticipant,
} from '../common/reply/reply-store';
import { factKey, normalizeFact } from './dto/fact.dto';
import { FactsService } from './facts.service';
import { learnedFactsStep } from './facts.step';
import { memoriesInsertStep } from './memories.step';

/** The facts of one reply without repeats (case and white space aside), as they are stored. */
function uniqueFacts(facts: string[]): Array<{ content: string; key: string }> {
  const unique = new Map<string, string>();
  for (const fact of facts) {
    const content = normalizeFact(fact);
    const key = factKey(content);
    if (content && !unique.has(key)) unique.set(key, content);
  }
  return [...unique].map(([key, content]) => ({ content, key }));
}

/**
 * Memory's part in storing a reply: the exchange's two memories (lent to the steps that name
 * them), and the facts the engine learned, under the end user's fact lock.
 */
@Injectable()
@StoresReplies({ lends: ['memories'] })
export class ReplyMemories implements ReplyStoreParticipant {
  constructor(private readonly facts: FactsService) {}

  storeExchange(exchange: StoredExchange): ExchangeContribution {
    const { organizationId, endUserId, personalityId, vocabularyVersion, at } = exchange;
    const common = {
      organizationId,
      endUserId,
      personalityId,
      vocabularyVersion,
      createdAt: at,
    };
    const { message, reply } = exchange;
    const memories = memoriesInsertStep([
      {
        ...common,
        role: 'user',
        content: message.content,
        emotion: message.emotion.name,
        intensity: message.emotion.intensity,
        safety: message.safety,
      },
      {
        ...common,
        role: 'personality',
        content: reply.content,
        emotion: reply.emotion.name,
        intensity: reply.emotion.intensity,
        safety: reply.safety,
        toolCalls: reply.toolCalls,
      },
    ]);
    const learned = uniqueFacts(exchange.facts);
    return {
      steps: [memories],
      lends: { memories },
      underLock:
        learned.length === 0
          ? undefined
          : async (manager: EntityManager) => {
              const room = await this.facts.roomFor(manager, endUserId);
              if (room === 0) return [];
              return [
                learnedFactsStep(memories, { organizationId, endUserId, facts: learned, room, at }),
              ];
            },
    };
  }
}
