import { Inject, Injectable } from '@nestjs/common';
import { AuditService } from '../audit/audit.service';
import type { CallerContext } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import { Clock } from '../common/time/clock';
import { type EndUsersConfig, endUsersConfig } from '../config/end-users.config';
import { Database } from '../database/database';
import { EndUserDeletionDto, EndUserDto, toEndUserResponse } from './dto/end-user.dto';
import type { EndUserRow } from './end-users.repository';
import { EndUsersRepository } from './end-users.repository';

export interface EnsuredEndUser {
  created: boolean;
  row: EndUserRow;
}

/** The end users of an organization (rules 1–5 of POST /v1/end-users) and their erasure. */
@Injectable()
export class EndUsersService {
  constructor(
    private readonly database: Database,
    @Inject(endUsersConfig.KEY) private readonly config: EndUsersConfig,
    private readonly endUsers: EndUsersRepository,
    private readonly audit: AuditService,
    private readonly clock: Clock,
  ) {}

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
    // No user_id in the text: it lands on the access line, where ids are keyed hashes (review).
    throw new Error('an end user could be neither created nor read');
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
