import { Inject, Injectable } from '@nestjs/common';
import { AuditService } from '../audit/audit.service';
import type { CallerContext } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import { Clock } from '../common/time/clock';
import { type EndUsersConfig, endUsersConfig } from '../config/end-users.config';
import { Database } from '../database/database';
import { isStatementTimeout } from '../common/errors/statement-timeout';
import { type MemoryConfig, memoryConfig } from '../config/memory.config';
import { MetricsService } from '../metrics/metrics.service';
import { Embedder } from '../embeddings/embedder';
import { PinoLogger } from 'nestjs-pino';
import type { RecalledMemory } from './memories.repository';
import { EndUserDeletionDto, EndUserDto, EndUserRow, toEndUserResponse } from './dto/end-user.dto';
import { type ConversationMemory, EndUsersRepository } from './end-users.repository';

export interface EnsuredEndUser {
  created: boolean;
  row: EndUserRow;
}

/** The end users of an organization and their memories (rules 1–5 of POST /v1/end-users). */
@Injectable()
export class EndUsersService {
  private readonly recallTimeouts: { inc(): void };

  constructor(
    private readonly database: Database,
    @Inject(endUsersConfig.KEY) private readonly config: EndUsersConfig,
    private readonly endUsers: EndUsersRepository,
    private readonly audit: AuditService,
    private readonly clock: Clock,
    @Inject(memoryConfig.KEY) private readonly memory: MemoryConfig,
    private readonly logger: PinoLogger,
    metrics: MetricsService,
    private readonly embedder: Embedder,
  ) {
    this.logger.setContext(EndUsersService.name);
    this.recallTimeouts = metrics.counter({
      name: 'memory_recall_timeouts_total',
      help: 'Replies that went on without recalled memories: recall ran past MEMORY_RECALL_TIMEOUT_MS',
    });
  }

  /**
   * The one row for (organization, user_id), created when absent: shared by POST /v1/end-users
   * and the implicit creation of POST /v1/respond. 409 while the user is under deletion.
   */
  async ensure(
    organizationId: string,
    userId: string,
    metadata?: Record<string, unknown>,
  ): Promise<EnsuredEndUser> {
    const metadataJson = metadata ? JSON.stringify(metadata) : '{}';
    // Bounded: each pass either inserts, or finds the row, or saw it erased in between.
    for (let attempt = 0; attempt < 3; attempt++) {
      const ensured = await this.endUsers.createOrGet(
        organizationId,
        userId,
        metadataJson,
        this.clock.now(),
      );
      // No row: a concurrent create committed after this statement's snapshot; read it now.
      const found = ensured ?? (await this.endUsers.findByUserId(organizationId, userId));
      if (!found) continue;
      if (found.status === 'deleting') throw this.underDeletion(found);
      return { created: ensured?.created ?? false, row: found };
    }
    throw new Error(`end user ${userId} could be neither created nor read`);
  }

  async get(organizationId: string, userId: string): Promise<EndUserDto> {
    return toEndUserResponse(await this.findRow(organizationId, userId));
  }

  /** The raw row (internal id included) for the modules above this one; 404 when unknown. */
  async findRow(organizationId: string, userId: string): Promise<EndUserRow> {
    const row = await this.endUsers.findByUserId(organizationId, userId);
    if (!row) throw AppError.notFound('End user');
    return row;
  }

  /** Ordered by user_id, which is also the cursor. */
  async list(
    organizationId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<EndUserDto>> {
    const rows = await this.endUsers.findPage(organizationId, limit, startingAfter);
    return toPage(rows, limit, toEndUserResponse);
  }

  async updateMetadata(
    organizationId: string,
    userId: string,
    metadata: Record<string, unknown>,
  ): Promise<EndUserDto> {
    const updated = await this.endUsers.updateActiveMetadata(
      organizationId,
      userId,
      JSON.stringify(metadata),
      this.clock.now(),
    );
    if (updated) return toEndUserResponse(updated);
    const existing = await this.findRow(organizationId, userId);
    throw this.underDeletion(existing);
  }

  /**
   * Marks the user for erasure after the grace period. Repeating it keeps the first schedule.
   * The erasure itself is the ErasureWorker's, from the row, so it survives restarts. The audit
   * log records the request (who asked, once: on the first DELETE), not the completed erasure.
   */
  async scheduleErasure(caller: CallerContext, userId: string): Promise<EndUserDeletionDto> {
    const { organizationId } = caller;
    const eraseAfter = new Date(this.clock.nowMs() + this.config.erasureGraceSeconds * 1000);
    return this.database.transaction(async (manager) => {
      const marked = await this.endUsers.markForErasure(
        manager,
        organizationId,
        userId,
        eraseAfter,
        this.clock.now(),
      );
      if (!marked) throw AppError.notFound('End user');
      if (marked.was_active) {
        await this.audit.record(manager, caller, {
          organizationId,
          action: 'end_user.deleted',
          target: { type: 'end_user', id: marked.user_id },
          details: { erase_after: marked.erase_after.toISOString() },
        });
      }
      return {
        user_id: marked.user_id,
        status: 'deleting' as const,
        erasure_expected_at: this.expectedErasure(marked.erase_after).toISOString(),
      };
    });
  }

  /**
   * The end user of a conversation with a personality and what it remembers of them for a reply
   * to `message` (recent history, facts, recalled older memories: docs/memory.md), in one round
   * trip; the end user is undefined when unknown. The caller decides whether to create it (see
   * ensure): only once the personality is known.
   */
  async findConversation(
    organizationId: string,
    userId: string,
    personalityId: string,
    message: string,
    limits: { history: number; recall: number },
  ): Promise<{ endUser: EndUserRow | undefined } & ConversationMemory> {
    // Two statements at once: recall has a budget of its own, and the reply does not wait for it
    // past that budget.
    const [found, recalled] = await Promise.all([
      this.endUsers.findConversation(organizationId, userId, personalityId, limits.history),
      limits.recall === 0
        ? []
        : this.recall(organizationId, userId, personalityId, message, limits),
    ]);
    return { ...found, recalled };
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
    const meaning = await this.embedder.embedQuery(message);
    try {
      return await this.endUsers.recall(
        organizationId,
        userId,
        personalityId,
        message,
        limits,
        timeoutMs,
        meaning,
      );
    } catch (error) {
      if (!isStatementTimeout(error)) throw error;
      this.recallTimeouts.inc();
      this.logger.warn(
        { organizationId, personalityId, timeoutMs },
        'memory recall ran past MEMORY_RECALL_TIMEOUT_MS: replying without recalled memories',
      );
      return [];
    }
  }

  underDeletion(row: Pick<EndUserRow, 'erase_after'>): AppError {
    const expected = this.expectedErasure(row.erase_after ?? this.clock.now()).toISOString();
    return new AppError(
      'end_user_under_deletion',
      `This end user is being erased; the user_id can be used again after ${expected}`,
      { extra: { erasure_expected_at: expected } },
    );
  }

  /** The worker polls, so the erasure ends within one interval after the grace period. */
  private expectedErasure(eraseAfter: Date): Date {
    return new Date(eraseAfter.getTime() + this.config.erasurePollIntervalMs);
  }
}
