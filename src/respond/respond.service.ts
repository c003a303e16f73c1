import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { AppError } from '../common/errors/app-error';
import { Clock } from '../common/time/clock';
import { type ReplyEndUser, type ReplyKnowledgeChunk } from '../common/reply/reply-participant';
import { ReplyParticipants } from '../common/reply/reply-participants';
import type { ReplyAdmission, SpentTokens, StoredExchange } from '../common/reply/reply-store';
import { type EngineConfig, engineConfig } from '../config/engine.config';
import { DEADLOCK_ATTEMPTS, Database } from '../database/database';
import { hasSqlState } from '../database/sql-state';
import type { WithEntry } from '../database/sql';
import { EndUsersService } from '../end-users/end-users.service';
import {
  PersonalitiesService,
  type PersonalityForReply,
} from '../personalities/personalities.service';
import { inClientSpan } from '../tracing/spans';
import type { EmotionVocabulary } from '../vocabularies/entities/emotion-vocabulary.entity';
import { VocabulariesService } from '../vocabularies/vocabularies.service';
import { type RespondAnswer, RespondDto, type ToolOutputsDto } from './dto/respond.dto';
import type { ToolTurnState } from '../tools/tool-turn-state';
import { ToolTurnsService } from '../tools/tool-turns.service';
import {
  type EngineMemory,
  type EngineReply,
  type RecalledEngineMemory,
  type ReplyRequest,
  RESPONSE_ENGINE,
  type ResponseEngine,
  type TokenUsage,
} from './engine/response-engine';
import { EngineMetrics } from './engine/routing/engine-metrics';
import { attemptedModel } from './engine/routing/engine-router';
import { RespondRepository } from './respond.repository';
import { type GeneratedReply, NO_VERDICT, type ReplyVerdicts } from './reply-generation';
import { ReplyGenerators } from './reply-generators';
import { promptTextsOf } from './prompt-texts';
import type { CallerContext } from '../common/auth/caller';

const FOREIGN_KEY_VIOLATION = '23503';

/** Failures that must not replace the error a request answers with (see endFailedTurn). */
const failedTurnLogger = new Logger('RespondService');

/** Everything a reply needs, checked before any of it is written or streamed. */
export interface Conversation {
  caller: CallerContext;
  organizationId: string;
  personality: PersonalityForReply;
  endUser: Pick<ReplyEndUser, 'id' | 'user_id'>;
  memories: EngineMemory[];
  facts: string[];
  recalled: RecalledEngineMemory[];
  /** Chunks of the personality's documents for the message: the engine's, and the citations. */
  knowledge: ReplyKnowledgeChunk[];
  vocabulary: EmotionVocabulary;
  message: string;
  /** The reply's admissions (the token budgets'): settled once it is stored, else given back. */
  admissions: ReplyAdmission[];
  /** Where the turn's tool calls stand (contract §26): fresh, or resumed from a pause. */
  tools: ToolTurnState;
  /** The paused turn this reply resumes, claimed for it: given back if the reply fails. */
  resumedTurnId?: string;
  /** The client's outputs the resumption brings: counted once the reply goes through. */
  resumedOutputs?: number;
}

export interface ReplyOptions {
  /** Aborted when the client goes away: the engine's call is cancelled and nothing is stored. */
  signal: AbortSignal;
  /** Receives the reply's text piece by piece (a streamed call); awaited before reading on. */
  onDelta?: (text: string) => Promise<void>;
}

@Injectable()
export class RespondService implements OnApplicationBootstrap {
  constructor(
    @Inject(engineConfig.KEY) private readonly config: EngineConfig,
    private readonly repository: RespondRepository,
    private readonly clock: Clock,
    private readonly endUsers: EndUsersService,
    private readonly personalities: PersonalitiesService,
    private readonly vocabularies: VocabulariesService,
    private readonly database: Database,
    @Inject(RESPONSE_ENGINE) private readonly engine: ResponseEngine,
    private readonly metrics: EngineMetrics,
    private readonly generators: ReplyGenerators,
    private readonly toolTurns: ToolTurnsService,
    private readonly participants: ReplyParticipants,
  ) {
    // The openai engine declares a series per configured model; the local one has no model.
    if (engine.name === 'local') metrics.declare(engine.name, null);
  }

  /** A reply without a participant for some of its context would answer without it: refused. */
  onApplicationBootstrap(): void {
    this.participants.assertComplete();
  }

  /**
   * A turn paused for client tools, resumed with their outputs (contract §26): prepared as its
   * message was, from the conversation as it is now, once claimed; a turn whose resumption is
   * refused (402, 404, 409) is pending again. `learnTurn` is told the turn's end user and
   * personality before anything of theirs is read.
   */
  async prepareResumption(
    caller: CallerContext,
    turnId: string,
    dto: ToolOutputsDto,
    learnTurn: (turn: { userId: string; personalityId: string }) => Promise<void>,
  ): Promise<Conversation> {
    const { organizationId } = caller;
    const { personalityId, state, answered } = await this.toolTurns.check(
      organizationId,
      turnId,
      dto.outputs,
    );
    // Before anything of the end user is read (the conversation, facts, recall).
    await learnTurn({ userId: state.userId, personalityId });
    // Claimed before the budgets are: of concurrent resumptions the losers get 409 at once,
    // where each reserved a reply's tokens first and most got 402 (found by review).
    await this.toolTurns.claim(organizationId, turnId, answered);
    try {
      const conversation = await this.prepare(
        caller,
        { personality_id: personalityId, user_id: state.userId, message: state.message },
        state,
      );
      return { ...conversation, resumedTurnId: turnId, resumedOutputs: answered.pending.length };
    } catch (error) {
      await this.toolTurns.release(organizationId, turnId);
      throw error;
    }
  }

  /**
   * The checks that answer 404/409 before a reply starts: the personality is the
   * organization's, and the end user (created on first contact) is not under deletion.
   */
  async prepare(
    caller: CallerContext,
    dto: RespondDto,
    resumed?: ToolTurnState,
  ): Promise<Conversation> {
    const { organizationId } = caller;
    // A 400 of the request's own before anything is read (a resumed turn's were checked).
    const requestTools = resumed
      ? []
      : await this.toolTurns.requestTools(organizationId, dto.tools ?? []);
    // The reads are scoped to the organization and independent, so they share the wait. An
    // end user met for the first time is created only once the personality is known to be the
    // organization's; one under deletion is refused by ensure() (409).
    const [personality, context] = await Promise.all([
      this.personalities.findForReply(organizationId, dto.personality_id),
      this.participants.read({
        organizationId,
        personalityId: dto.personality_id,
        userId: dto.user_id,
        message: dto.message,
      }),
    ]);
    // A resumed turn's tools were checked when it started.
    const tools =
      resumed ??
      this.toolTurns.start(
        { userId: dto.user_id, message: dto.message, tools: requestTools },
        personality.tools,
      );
    // The end user read with the memories, when it is this turn's and active; else created or
    // refused (409 under deletion) by ensure(), whatever a participant answered.
    const found = context.endUser;
    const endUser =
      found?.status === 'active' &&
      found.organization_id === organizationId &&
      found.user_id === dto.user_id
        ? found
        : (await this.endUsers.ensure(organizationId, dto.user_id)).row;
    const vocabulary = this.vocabularies.latestDefinition();
    // Over a token budget: 402 before anything is asked of the provider.
    const admissions = await this.participants.admit({
      organizationId,
      endUserId: endUser.id,
      promptTexts: promptTextsOf(
        personality,
        context,
        dto.message,
        tools,
        vocabulary.emotions.map((emotion) => emotion.name),
      ),
    });
    return {
      caller,
      organizationId,
      personality,
      endUser,
      memories: context.history,
      facts: context.facts,
      recalled: context.recalled,
      knowledge: context.knowledge,
      vocabulary,
      message: dto.message,
      admissions,
      tools,
    };
  }

  /**
   * The engine's reply, within ENGINE_TIMEOUT_MS, under the organization's safety settings
   * (docs/safety.md), and only once it is complete the exchange is stored: the two memories with
   * their verdicts, the facts learned, the month's relationship, the token counts and a flagged
   * exchange's audit and webhook events, in one transaction.
   */
  async reply(conversation: Conversation, options: ReplyOptions): Promise<RespondAnswer> {
    try {
      const answer = await this.replyAndStore(conversation, options);
      // Not before: a resumption that fails gives its turn back, and the outputs sent again
      // would be counted twice.
      if (conversation.resumedOutputs) this.toolTurns.countOutputs(conversation.resumedOutputs);
      return answer;
    } catch (error) {
      await this.endFailedTurn(conversation);
      // A pause saved after its personality or end user went (tool_turns' foreign keys).
      throw this.vanishedMeanwhile(error) ?? error;
    } finally {
      // Failed or cancelled (none spent); a stored reply's statement settled them already.
      this.release(conversation);
    }
  }

  private release({ admissions }: Conversation): void {
    for (const admission of admissions) admission.release();
  }

  /**
   * Nothing was stored, but the model calls the turn made were spent: their tokens are counted
   * (as no reply), and a resumed turn is given back rather than lost with its message, in one
   * statement, so a retry of the resumption does not count them again. Whatever happens here,
   * the request answers with the error that ended the turn (a 402, 502 or 504), never with this.
   */
  private async endFailedTurn(conversation: Conversation): Promise<void> {
    const { organizationId, resumedTurnId, tools } = conversation;
    const spent = tools.usage;
    tools.usage = null;
    const at = this.clock.now();
    const count = async (endUserErased: boolean) => {
      const unstored = spent
        ? this.tokenSteps(conversation, spent, tools.model, at, endUserErased)
        : [];
      if (resumedTurnId) await this.toolTurns.release(organizationId, resumedTurnId, unstored);
      else if (unstored.length > 0) await this.repository.storeExchange(unstored);
    };
    try {
      // Participants' code: inside the try, so that nothing it throws replaces the turn's error.
      await count(false).catch(async (error: unknown) => {
        // The end user was erased meanwhile (their rollups' foreign keys): the organization's
        // count stays, or erasing an end user mid-turn would spend its tokens for free.
        if (!this.vanishedMeanwhile(error) || this.personalityVanished(error)) throw error;
        await count(true);
      });
    } catch (error) {
      // The end user or personality went meanwhile: the tokens of its turn went with it.
      if (this.vanishedMeanwhile(error)) return;
      // The error as a field: its serializer keeps a database error's content out (review).
      failedTurnLogger.error(
        { err: error, organizationId },
        "a failed turn's tokens could not be counted",
      );
      // The turn is given back all the same, so its outputs can be sent again.
      if (resumedTurnId) {
        await this.toolTurns.release(organizationId, resumedTurnId).catch((again: unknown) => {
          failedTurnLogger.error(
            { err: again, turnId: resumedTurnId },
            'a turn could not be given back; it stays resumed until it expires',
          );
        });
      }
    }
  }

  /** The steps counting tokens of a turn that has no reply (yet): they count as no request. */
  private tokenSteps(
    conversation: Conversation,
    usage: TokenUsage,
    model: string | null,
    at: Date,
    endUserErased = false,
  ): WithEntry[] {
    return this.participants.countTokens(
      { ...this.ownerOf(conversation, at), tokens: { ...usage, model }, endUserErased },
      conversation.admissions,
    );
  }

  /** Who the turn is for, as everything its statement writes names them. */
  private ownerOf(conversation: Conversation, at: Date) {
    const { caller, organizationId, endUser, personality } = conversation;
    return {
      caller,
      organizationId,
      endUserId: endUser.id,
      userId: endUser.user_id,
      personalityId: personality.id,
      at,
    };
  }

  private async replyAndStore(
    conversation: Conversation,
    options: ReplyOptions,
  ): Promise<RespondAnswer> {
    const { signal } = options;
    const { personality, endUser } = conversation;
    const generated = await this.generators.generate(
      {
        organizationId: conversation.organizationId,
        turn: {
          endUserId: endUser.id,
          userId: endUser.user_id,
          state: conversation.tools,
          assertRoomFor: async (tokens, addedPromptTexts) => {
            for (const admission of conversation.admissions) {
              await admission.assertRoomFor(tokens, addedPromptTexts);
            }
          },
          tokenSteps: (usage, model, at) => this.tokenSteps(conversation, usage, model, at),
        },
        request: {
          personality,
          message: conversation.message,
          memories: conversation.memories,
          facts: conversation.facts,
          recalled: conversation.recalled,
          knowledge: conversation.knowledge,
          vocabulary: conversation.vocabulary,
          crisis: false,
        },
        signal,
        onDelta: options.onDelta,
      },
      async ({ request, signal: engineSignal, onDelta }) => ({
        kind: 'reply',
        reply: await this.askEngine({ ...request, signal: engineSignal, onDelta }, engineSignal),
        engineAsked: true,
        toolCalls: [],
      }),
    );
    if (generated.kind === 'paused') {
      return {
        status: 'requires_action',
        turn_id: generated.turnId,
        tool_calls: generated.toolCalls,
        personality_id: personality.id,
        user_id: endUser.user_id,
      };
    }
    // A client that left while the reply was written gets nothing stored.
    signal.throwIfAborted();
    const { reply } = generated;
    const verdicts = generated.verdicts ?? {
      message: NO_VERDICT,
      reply: NO_VERDICT,
      exchange: NO_VERDICT,
    };
    const at = await this.store(conversation, generated, verdicts);
    return {
      personality_id: personality.id,
      user_id: endUser.user_id,
      reply: { text: reply.text, emotion: reply.emotion },
      model: reply.model,
      vocabulary_version: conversation.vocabulary.version,
      safety: verdicts.exchange,
      // What the engine was given: nothing when a participant answered in its place.
      citations: generated.engineAsked
        ? conversation.knowledge.map(({ document_id, title, chunk_index }) => ({
            document_id,
            title,
            chunk_index,
          }))
        : [],
      created_at: at.toISOString(),
      status: 'completed',
    };
  }

  /**
   * The exchange and what each participant writes with it (docs/decisions.md, "Code") land
   * together or not at all: one statement, in a transaction with the locks a participant takes
   * first (the end user's fact lock when facts were learned).
   */
  private async store(
    conversation: Conversation,
    { reply, toolCalls }: GeneratedReply,
    verdicts: ReplyVerdicts,
  ): Promise<Date> {
    const at = this.clock.now();
    const tokens: SpentTokens | null = reply.usage ? { ...reply.usage, model: reply.model } : null;
    const exchange: StoredExchange = {
      ...this.ownerOf(conversation, at),
      vocabularyVersion: conversation.vocabulary.version,
      message: { content: conversation.message, emotion: reply.detected, safety: verdicts.message },
      reply: {
        content: reply.text,
        emotion: reply.emotion,
        safety: verdicts.reply,
        toolCalls: toolCalls.length > 0 ? toolCalls : null,
      },
      safety: verdicts.exchange,
      facts: reply.facts,
      tokens,
    };
    const { steps, underLock } = this.participants.storeExchange(exchange, conversation.admissions);
    if (conversation.resumedTurnId) {
      steps.push(
        this.toolTurns.completedStep(conversation.organizationId, conversation.resumedTurnId),
      );
    }
    const stored =
      underLock.length === 0
        ? this.repository.storeExchange(steps)
        : this.database.transaction(
            async (manager) => {
              const all = [...steps];
              for (const locked of underLock) all.push(...(await locked(manager)));
              await this.repository.storeExchange(all, manager);
            },
            { deadlockAttempts: DEADLOCK_ATTEMPTS },
          );
    await stored.catch((error: unknown) => {
      // A statement PostgreSQL refused was rolled back: its tokens are counted as a failed
      // turn's. A connection lost on the way may have committed it: they are not counted again.
      if (!hasSqlState(error)) conversation.tools.usage = null;
      throw this.vanishedMeanwhile(error) ?? error;
    });
    // Their reservations went with the statement, swapped for its tokens.
    for (const admission of conversation.admissions) admission.settled();
    return at;
  }

  /** The engine's reply within ENGINE_TIMEOUT_MS, counted and traced. */
  private askEngine(request: ReplyRequest, clientSignal: AbortSignal): Promise<EngineReply> {
    const engine = this.engine.name;
    return inClientSpan(`engine ${engine} reply`, { 'engine.name': engine }, async () => {
      const timeout = AbortSignal.timeout(this.config.timeoutMs);
      try {
        const reply = await this.engine.reply({
          ...request,
          signal: AbortSignal.any([clientSignal, timeout]),
        });
        this.metrics.count(engine, reply.model, 'ok');
        return reply;
      } catch (error) {
        const model = attemptedModel(error);
        if (clientSignal.aborted) {
          this.metrics.count(engine, model, 'cancelled');
          // A shutdown abandoning the reply aborts with the answer its client gets (a 503).
          throw clientSignal.reason instanceof AppError ? clientSignal.reason : error;
        }
        if (timeout.aborted) {
          this.metrics.count(engine, model, 'timeout');
          throw new AppError(
            'engine_timeout',
            `The model provider gave no complete reply within ${this.config.timeoutMs} ms`,
          );
        }
        this.metrics.count(engine, model, 'error');
        throw error;
      }
    });
  }

  /**
   * The personality deleted, or the end user erased, between the reads and the writes: the
   * foreign keys refuse the writes, and the caller gets what a moment later they would have.
   */
  private vanishedMeanwhile(error: unknown): AppError | undefined {
    const { code } = error as { code?: string };
    if (code !== FOREIGN_KEY_VIOLATION) return undefined;
    if (this.personalityVanished(error)) return AppError.notFound('Personality');
    return this.endUsers.underDeletion({ erase_after: null });
  }

  /** A write refused because the personality went: the memories' or a paused turn's key. */
  private personalityVanished(error: unknown): boolean {
    const { constraint } = error as { constraint?: string };
    return (
      constraint === 'memories_personality_id_fkey' ||
      constraint === 'tool_turns_personality_id_fkey'
    );
  }
}
