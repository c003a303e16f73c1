import { Inject, Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { isStatementTimeout } from '../common/errors/statement-timeout';
import {
  ReadsForReplies,
  type ReplyContribution,
  type ReplyParticipant,
  type ReplyTurn,
} from '../common/reply/reply-participant';
import { type DatabaseConfig, databaseConfig } from '../config/database.config';
import { type EngineConfig, engineConfig } from '../config/engine.config';
import { type MemoryConfig, memoryConfig } from '../config/memory.config';
import { isPoolTimeout } from '../database/database';
import { Embedder } from '../embeddings/embedder';
import { MetricsService } from '../metrics/metrics.service';
import {
  type ConversationEndUser,
  type ConversationMemory,
  ConversationRepository,
  type RecalledMemory,
} from './conversation.repository';

/**
 * What a reply remembers of its end user: recent history, facts and recall (docs/memory.md). A
 * reply participant: it reads them, and the end user with them, for every reply.
 */
@Injectable()
@ReadsForReplies('endUser', 'history', 'facts', 'recalled')
export class ConversationService implements ReplyParticipant {
  private readonly recallTimeouts: { inc(): void };

  constructor(
    private readonly conversations: ConversationRepository,
    @Inject(memoryConfig.KEY) private readonly memory: MemoryConfig,
    @Inject(engineConfig.KEY) private readonly engine: EngineConfig,
    @Inject(databaseConfig.KEY) private readonly database: DatabaseConfig,
    private readonly logger: PinoLogger,
    metrics: MetricsService,
    private readonly embedder: Embedder,
  ) {
    this.logger.setContext(ConversationService.name);
    this.recallTimeouts = metrics.counter({
      name: 'memory_recall_timeouts_total',
      help: 'Replies that went on without recalled memories: recall ran past MEMORY_RECALL_TIMEOUT_MS',
    });
  }

  /** ENGINE_HISTORY_MESSAGES of history and MEMORY_RECALL_LIMIT recalled, for a reply. */
  async readReplyContext(turn: ReplyTurn): Promise<ReplyContribution> {
    const { endUser, history, facts, recalled } = await this.findConversation(
      turn.organizationId,
      turn.userId,
      turn.personalityId,
      turn.message,
      { history: this.engine.historyMessages, recall: this.memory.recallLimit },
    );
    return { endUser, history, facts, recalled };
  }

  /**
   * The end user of a conversation with a personality and what it remembers of them for a reply
   * to `message` (recent history, facts, recalled older memories: docs/memory.md), in one round
   * trip (two with embeddings on); the end user is undefined when unknown. The caller decides
   * whether to create it (see ensure): only once the personality is known.
   */
  async findConversation(
    organizationId: string,
    userId: string,
    personalityId: string,
    message: string,
    limits: { history: number; recall: number },
  ): Promise<{ endUser: ConversationEndUser | undefined } & ConversationMemory> {
    if (limits.recall === 0) {
      return this.withoutRecall(organizationId, userId, personalityId, limits.history);
    }
    if (!this.embedder.vectorKind) {
      return this.findConversationRecalling(organizationId, userId, personalityId, message, limits);
    }
    // With embeddings on, two statements at once: the conversation is read while the message is
    // embedded, and recall, with a budget of its own, once it is.
    const [found, recalled] = await Promise.all([
      this.conversations.findConversation(organizationId, userId, personalityId, limits.history),
      this.recall(organizationId, userId, personalityId, message, limits),
    ]);
    return { ...found, recalled };
  }

  /**
   * By words alone, the conversation and recall in one round trip on recall's sessions, within
   * recall's budget (never more than a statement's); past it, or with none of those sessions free
   * in time, the conversation is read again without recall on the requests' pool (a second round
   * trip only then: under load a reply may wait for the budget and then the read).
   */
  private async findConversationRecalling(
    organizationId: string,
    userId: string,
    personalityId: string,
    message: string,
    limits: { history: number; recall: number },
  ): Promise<{ endUser: ConversationEndUser | undefined } & ConversationMemory> {
    const timeoutMs = Math.min(this.memory.recallTimeoutMs, this.database.statementTimeoutMs);
    try {
      return await this.conversations.findConversationRecalling(
        organizationId,
        userId,
        personalityId,
        message,
        limits,
        timeoutMs,
      );
    } catch (error) {
      if (!this.gaveUpRecall(error, organizationId, personalityId, timeoutMs)) throw error;
      return this.withoutRecall(organizationId, userId, personalityId, limits.history);
    }
  }

  private async withoutRecall(
    organizationId: string,
    userId: string,
    personalityId: string,
    history: number,
  ): Promise<{ endUser: ConversationEndUser | undefined } & ConversationMemory> {
    const found = await this.conversations.findConversation(
      organizationId,
      userId,
      personalityId,
      history,
    );
    return { ...found, recalled: [] };
  }

  /** Recall within MEMORY_RECALL_TIMEOUT_MS; past it none, logged and counted (contract §29). */
  private async recall(
    organizationId: string,
    userId: string,
    personalityId: string,
    message: string,
    limits: { history: number; recall: number },
  ): Promise<RecalledMemory[]> {
    const timeoutMs = this.memory.recallTimeoutMs;
    // The message's embedding first (null when off, slow or failing: recall by words alone).
    const meaning = await this.embedder.embedQuery(organizationId, message);
    try {
      return await this.conversations.recall(
        organizationId,
        userId,
        personalityId,
        message,
        limits,
        timeoutMs,
        meaning,
      );
    } catch (error) {
      if (!this.gaveUpRecall(error, organizationId, personalityId, timeoutMs)) throw error;
      return [];
    }
  }

  /**
   * Whether `error` leaves the reply without recalled memories, logged: recall ran past its
   * budget (counted too), or its bounded sessions were all busy (Database#rowsWithin: the
   * database is slow). Any other error is the caller's.
   */
  private gaveUpRecall(
    error: unknown,
    organizationId: string,
    personalityId: string,
    timeoutMs: number,
  ): boolean {
    if (isStatementTimeout(error)) {
      this.recallTimeouts.inc();
      this.logger.warn(
        { organizationId, personalityId, timeoutMs },
        'memory recall ran past MEMORY_RECALL_TIMEOUT_MS: replying without recalled memories',
      );
      return true;
    }
    if (isPoolTimeout(error)) {
      this.logger.warn(
        { organizationId, personalityId },
        'no session for recall in time: replying without recalled memories',
      );
      return true;
    }
    return false;
  }
}
