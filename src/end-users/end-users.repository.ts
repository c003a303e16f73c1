import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import { poolOf } from '../database/pg-pool';
import { WebhookEventsService } from '../webhooks/webhook-events.service';
import type { EndUserRow } from './dto/end-user.dto';
import type { RecalledMemory } from './memories.repository';

const COLUMNS = 'id, user_id, metadata, status, erase_after, created_at, updated_at';

/**
 * Create-or-get in one statement: the INSERT wins or the existing row is read in the same round
 * trip, and a new row's `end_user.created` webhook event is written by the same statement. A row
 * committed by a concurrent request after this statement's snapshot is invisible to the second
 * branch (the INSERT still sees the conflict), so that rare race answers no row and the caller
 * reads again (see EndUsersService.ensure). Exported for bench/scenarios/end-users.ts, whose
 * pgbench runs this very statement.
 */
export function createOrGetStatement(event: { sql: string }) {
  return {
    name: 'end_users_create_or_get',
    text: `WITH inserted AS (
             INSERT INTO end_users (organization_id, user_id, metadata) VALUES ($1, $2, $3)
             ON CONFLICT (organization_id, user_id) DO NOTHING
             RETURNING ${COLUMNS},
                       jsonb_build_object('user_id', user_id, 'created_at', created_at) AS webhook_data),
           ${event.sql}
           SELECT true AS created, ${COLUMNS} FROM inserted
           UNION ALL
           SELECT false, ${COLUMNS} FROM end_users
            WHERE organization_id = $1 AND user_id = $2 AND NOT EXISTS (SELECT 1 FROM inserted)`,
  };
}

const READ_ONE = {
  name: 'end_users_read_one',
  text: `SELECT ${COLUMNS} FROM end_users WHERE organization_id = $1 AND user_id = $2`,
};

/**
 * One row: the end user, and its latest memories with the personality as a JSON array, oldest
 * first. (A join would repeat the end user's columns on every memory row, and the driver parses
 * each repeated timestamp and metadata again: a tenth of a reply's CPU with 20 memories.)
 */
const READ_WITH_LATEST_MEMORIES = {
  name: 'end_users_read_with_latest_memories',
  text: `SELECT e.id, e.user_id, e.metadata, e.status, e.erase_after, e.created_at, e.updated_at,
                COALESCE((
                  SELECT json_agg(json_build_object(
                           'role', m.role, 'content', m.content, 'emotion', m.emotion) ORDER BY m.id)
                    FROM (SELECT id, role, content, emotion FROM memories
                           WHERE end_user_id = e.id AND personality_id = $3
                           ORDER BY id DESC LIMIT $4) m), '[]') AS memories
           FROM end_users e
          WHERE e.organization_id = $1 AND e.user_id = $2`,
};

type RowWithMemories = EndUserRow & { memories: RecalledMemory[] };

export interface ErasureMark {
  user_id: string;
  erase_after: Date;
  /** Whether this statement moved the user out of 'active' (false when already deleting). */
  was_active: boolean;
}

export interface DueErasure {
  id: string;
  organization_id: string;
  user_id: string;
}

/**
 * The SQL of the end_users table. Raw SQL on the pool for the single-statement paths (create-or-
 * get is the hottest write of the API); the erasure's statements take the EntityManager of the
 * transaction they belong to.
 */
@Injectable()
export class EndUsersRepository {
  private readonly pool: Pool;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    private readonly webhookEvents: WebhookEventsService,
  ) {
    this.pool = poolOf(dataSource);
  }

  /** The row, with `created` true when this statement inserted it; undefined in the rare race. */
  async createOrGet(
    organizationId: string,
    userId: string,
    metadataJson: string,
  ): Promise<(EndUserRow & { created: boolean }) | undefined> {
    const event = this.webhookEvents.step('inserted', 4, {
      organizationId,
      type: 'end_user.created',
    });
    const { rows } = await this.pool.query<EndUserRow & { created: boolean }>({
      ...createOrGetStatement(event),
      values: [organizationId, userId, metadataJson, ...event.params],
    });
    return rows[0];
  }

  async findByUserId(organizationId: string, userId: string): Promise<EndUserRow | undefined> {
    const { rows } = await this.pool.query<EndUserRow>({
      ...READ_ONE,
      values: [organizationId, userId],
    });
    return rows[0];
  }

  /**
   * The user (undefined when unknown) and their latest `limit` memories with a personality,
   * oldest first.
   */
  async findWithLatestMemories(
    organizationId: string,
    userId: string,
    personalityId: string,
    limit: number,
  ): Promise<{ endUser: EndUserRow | undefined; memories: RecalledMemory[] }> {
    const { rows } = await this.pool.query<RowWithMemories>({
      ...READ_WITH_LATEST_MEMORIES,
      values: [organizationId, userId, personalityId, limit],
    });
    if (rows.length === 0) return { endUser: undefined, memories: [] };
    const { memories, ...endUser } = rows[0];
    return { endUser, memories };
  }

  /** Ordered by user_id, `limit + 1` rows (the extra one tells whether more follow). */
  async findPage(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<EndUserRow[]> {
    const { rows } = await this.pool.query<EndUserRow>(
      `SELECT ${COLUMNS} FROM end_users
        WHERE organization_id = $1 AND ($2::text IS NULL OR user_id > $2)
        ORDER BY user_id LIMIT $3`,
      [organizationId, startingAfter ?? null, limit + 1],
    );
    return rows;
  }

  /** Replaces the metadata of an active user; undefined when unknown or under deletion. */
  async updateActiveMetadata(
    organizationId: string,
    userId: string,
    metadataJson: string,
  ): Promise<EndUserRow | undefined> {
    const { rows } = await this.pool.query<EndUserRow>(
      `UPDATE end_users SET metadata = $3, updated_at = now()
        WHERE organization_id = $1 AND user_id = $2 AND status = 'active'
        RETURNING ${COLUMNS}`,
      [organizationId, userId, metadataJson],
    );
    return rows[0];
  }

  /**
   * Marks the user 'deleting', keeping an earlier schedule; undefined when unknown. The CTE reads
   * the status before the UPDATE, under its row lock: of concurrent calls exactly one sees
   * 'active'.
   */
  async markForErasure(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    eraseAfter: Date,
  ): Promise<ErasureMark | undefined> {
    const rows: ErasureMark[] = await manager.query(
      `WITH before AS (
         SELECT id, status FROM end_users
          WHERE organization_id = $1 AND user_id = $2 FOR UPDATE),
       marked AS (
         UPDATE end_users e
            SET status = 'deleting',
                erase_after = COALESCE(e.erase_after, $3::timestamptz),
                updated_at = now()
           FROM before WHERE e.id = before.id
         RETURNING e.user_id, e.erase_after, before.status = 'active' AS was_active)
       SELECT * FROM marked`,
      [organizationId, userId, eraseAfter],
    );
    return rows[0];
  }

  /** Database-wide; the partial index end_users_erasure_due_idx covers it. */
  async countDeleting(): Promise<number> {
    const { rows } = await this.pool.query<{ pending: number }>(
      `SELECT count(*)::int AS pending FROM end_users WHERE status = 'deleting'`,
    );
    return rows[0].pending;
  }

  /**
   * Up to `limit` users due at `now`, locked for the caller's transaction; rows another
   * transaction holds are skipped, so two instances never claim the same user.
   */
  claimDue(manager: EntityManager, now: Date, limit: number): Promise<DueErasure[]> {
    return manager.query(
      `SELECT id, organization_id, user_id FROM end_users
        WHERE status = 'deleting' AND erase_after <= $1
        ORDER BY erase_after
        LIMIT $2
        FOR UPDATE SKIP LOCKED`,
      [now, limit],
    );
  }

  async deleteByIds(manager: EntityManager, ids: string[]): Promise<void> {
    await manager.query('DELETE FROM end_users WHERE id = ANY($1::uuid[])', [ids]);
  }
}
