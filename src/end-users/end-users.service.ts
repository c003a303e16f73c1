import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool, PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import type { CallerContext } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import type { EndUsersConfig } from '../config/end-users.config';
import { poolOf } from '../database/pg-pool';
import { EndUserDeletionDto, EndUserDto, EndUserRow, toEndUserResponse } from './dto/end-user.dto';
import type { MemoryRole } from './entities/memory.entity';

const COLUMNS = 'id, user_id, metadata, status, erase_after, created_at, updated_at';

/**
 * Create-or-get in one statement: the INSERT wins or the existing row is read in the same round
 * trip. A row committed by a concurrent request after this statement's snapshot is invisible to
 * the second branch (the INSERT still sees the conflict), so that rare race falls back to a
 * separate read (see ensure()).
 */
const CREATE_OR_GET = {
  name: 'end_users_create_or_get',
  text: `WITH inserted AS (
           INSERT INTO end_users (organization_id, user_id, metadata) VALUES ($1, $2, $3)
           ON CONFLICT (organization_id, user_id) DO NOTHING
           RETURNING ${COLUMNS})
         SELECT true AS created, * FROM inserted
         UNION ALL
         SELECT false, ${COLUMNS} FROM end_users
          WHERE organization_id = $1 AND user_id = $2 AND NOT EXISTS (SELECT 1 FROM inserted)`,
};

const READ_ONE = {
  name: 'end_users_read_one',
  text: `SELECT ${COLUMNS} FROM end_users WHERE organization_id = $1 AND user_id = $2`,
};

export interface EnsuredEndUser {
  created: boolean;
  row: EndUserRow;
}

export interface NewMemory {
  organizationId: string;
  endUserId: string;
  personalityId: string;
  role: MemoryRole;
  content: string;
  emotion: string | null;
  intensity: number | null;
  vocabularyVersion: string | null;
  createdAt: Date;
}

export interface RecalledMemory {
  role: MemoryRole;
  content: string;
  emotion: string | null;
  created_at: Date;
}

/** The end users of an organization and their memories (rules 1–5 of POST /v1/end-users). */
@Injectable()
export class EndUsersService {
  private readonly pool: Pool;
  private readonly config: EndUsersConfig;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    config: ConfigService,
    private readonly audit: AuditService,
  ) {
    this.pool = poolOf(dataSource);
    this.config = config.getOrThrow<EndUsersConfig>('endUsers');
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
    const metadataJson = JSON.stringify(metadata ?? {});
    // Bounded: each pass either inserts, or finds the row, or saw it erased in between.
    for (let attempt = 0; attempt < 3; attempt++) {
      const { rows } = await this.pool.query<EndUserRow & { created: boolean }>({
        ...CREATE_OR_GET,
        values: [organizationId, userId, metadataJson],
      });
      let found: EndUserRow | undefined = rows[0];
      const created = rows[0]?.created ?? false;
      if (!found) {
        found = (
          await this.pool.query<EndUserRow>({ ...READ_ONE, values: [organizationId, userId] })
        ).rows[0];
      }
      if (!found) continue;
      if (found.status === 'deleting') throw this.underDeletion(found);
      return { created, row: found };
    }
    throw new Error(`end user ${userId} could be neither created nor read`);
  }

  async get(organizationId: string, userId: string): Promise<EndUserDto> {
    return toEndUserResponse(await this.findRow(organizationId, userId));
  }

  /** The raw row (internal id included) for the modules above this one; 404 when unknown. */
  async findRow(organizationId: string, userId: string): Promise<EndUserRow> {
    const { rows } = await this.pool.query<EndUserRow>({
      ...READ_ONE,
      values: [organizationId, userId],
    });
    if (!rows[0]) throw AppError.notFound('End user');
    return rows[0];
  }

  /** Ordered by user_id, which is also the cursor. */
  async list(
    organizationId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<EndUserDto>> {
    const { rows } = await this.pool.query<EndUserRow>(
      `SELECT ${COLUMNS} FROM end_users
        WHERE organization_id = $1 AND ($2::text IS NULL OR user_id > $2)
        ORDER BY user_id LIMIT $3`,
      [organizationId, startingAfter ?? null, limit + 1],
    );
    return toPage(rows, limit, toEndUserResponse);
  }

  async updateMetadata(
    organizationId: string,
    userId: string,
    metadata: Record<string, unknown>,
  ): Promise<EndUserDto> {
    const { rows } = await this.pool.query<EndUserRow>(
      `UPDATE end_users SET metadata = $3, updated_at = now()
        WHERE organization_id = $1 AND user_id = $2 AND status = 'active'
        RETURNING ${COLUMNS}`,
      [organizationId, userId, JSON.stringify(metadata)],
    );
    if (rows[0]) return toEndUserResponse(rows[0]);
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
    return this.dataSource.transaction(async (manager) => {
      // The CTE reads the status before the UPDATE, under its row lock: of concurrent DELETEs
      // exactly one sees 'active' and is audited.
      const rows: Array<{ user_id: string; erase_after: Date; was_active: boolean }> =
        await manager.query(
          `WITH before AS (
             SELECT id, status FROM end_users
              WHERE organization_id = $1 AND user_id = $2 FOR UPDATE),
           marked AS (
             UPDATE end_users e
                SET status = 'deleting',
                    erase_after = COALESCE(e.erase_after, now() + make_interval(secs => $3)),
                    updated_at = now()
               FROM before WHERE e.id = before.id
             RETURNING e.user_id, e.erase_after, before.status = 'active' AS was_active)
           SELECT * FROM marked`,
          [organizationId, userId, this.config.erasureGraceSeconds],
        );
      if (!rows[0]) throw AppError.notFound('End user');
      if (rows[0].was_active) {
        await this.audit.record(manager, caller, {
          organizationId,
          action: 'end_user.deleted',
          target: { type: 'end_user', id: rows[0].user_id },
          details: { erase_after: rows[0].erase_after.toISOString() },
        });
      }
      return {
        user_id: rows[0].user_id,
        status: 'deleting' as const,
        erasure_expected_at: this.expectedErasure(rows[0].erase_after).toISOString(),
      };
    });
  }

  /** Appends memories in the caller's transaction, in the order given. */
  async appendMemories(client: PoolClient, memories: NewMemory[]): Promise<void> {
    const values: unknown[] = [];
    const tuples = memories.map((memory, index) => {
      values.push(
        memory.organizationId,
        memory.endUserId,
        memory.personalityId,
        memory.role,
        memory.content,
        memory.emotion,
        memory.intensity,
        memory.vocabularyVersion,
        memory.createdAt,
      );
      const base = index * 9;
      return `(${Array.from({ length: 9 }, (_, i) => `$${base + i + 1}`).join(', ')})`;
    });
    await client.query(
      `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content,
                             emotion, intensity, vocabulary_version, created_at)
       VALUES ${tuples.join(', ')}`,
      values,
    );
  }

  /**
   * What a personality remembers of a user: their latest exchanges, oldest first. Looked up by
   * user_id so a first-time caller needs no end-user row yet.
   */
  async recall(
    organizationId: string,
    userId: string,
    personalityId: string,
    limit: number,
  ): Promise<RecalledMemory[]> {
    const { rows } = await this.pool.query<RecalledMemory>({
      name: 'memories_recall',
      text: `SELECT m.role, m.content, m.emotion, m.created_at
               FROM end_users e
               JOIN memories m ON m.end_user_id = e.id AND m.personality_id = $3
              WHERE e.organization_id = $1 AND e.user_id = $2
              ORDER BY m.id DESC LIMIT $4`,
      values: [organizationId, userId, personalityId, limit],
    });
    return rows.reverse();
  }

  underDeletion(row: Pick<EndUserRow, 'erase_after'>): AppError {
    const expected = this.expectedErasure(row.erase_after ?? new Date()).toISOString();
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
