import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { Columns, type RowOf } from '../database/columns';
import { cte, empty, type Sql, sql, withEntries } from '../database/sql';
import { webhookEventStep } from '../webhooks/webhook-event.step';
import type { EndUser } from './entities/end-user.entity';
import {
  type ErasedEndUser,
  ErasesEndUsers,
  ErasureOrder,
} from '../common/erasure/erasure-participant';
import { isoTime } from '../database/iso-time';

/** An end_users row as EndUsersService reads it. */
const END_USER = Columns.rowOf<EndUser>()(
  'id',
  'userId',
  'metadata',
  'status',
  'eraseAfter',
  'createdAt',
  'updatedAt',
);

export type EndUserRow = RowOf<typeof END_USER>;

/** Create-or-get's row: the end user, with whether this statement inserted it. */
const CREATED_OR_GOT = Columns.computed<{ created: boolean }>({ created: sql`true` }).and(END_USER);

const ERASURE_MARK = Columns.rowOf<EndUser>('e')('userId').and(
  Columns.computed<{
    /** Set by the statement: never null. */
    erase_after: Date;
    /** Whether this statement moved the user out of 'active' (false when already deleting). */
    was_active: boolean;
  }>({ erase_after: sql`e.erase_after`, was_active: sql`before.status = 'active'` }),
);

const DUE_ERASURE = Columns.rowOf<EndUser>('e')('id', 'organizationId', 'userId');

/**
 * Organizations with end users due whose turn a claim looks at: the first ones after the last
 * claim's, by id, so every one gets its turn however many are erasing at once.
 */
const ORGANIZATIONS_PER_CLAIM = 50;
/**
 * Candidates an organization gives a claim per end user the claim takes: room to skip the rows
 * other instances' batches hold and still fill this one.
 */
const CANDIDATES_PER_SLOT = 4;

const PENDING_COUNT = Columns.computed<{ pending: number }>({ pending: sql`count(*)::int` });

/**
 * Create-or-get in one statement: the INSERT wins or the existing row is read in the same round
 * trip, and a new row's `end_user.created` webhook event is written by the same statement. A row
 * committed by a concurrent request after this statement's snapshot is invisible to the second
 * branch (the INSERT still sees the conflict), so that rare race answers no row and the caller
 * reads again (see EndUsersService.ensure). Exported for bench/scenarios/end-users.ts, whose
 * pgbench runs this very statement.
 */
export function createOrGetStatement(
  organizationId: string,
  userId: string,
  metadataJson: string,
  at: Date,
) {
  const inserted = cte(
    'inserted',
    {
      webhook_data: sql`jsonb_build_object('user_id', user_id, 'created_at', ${isoTime('created_at')})`,
    },
    (lent) => sql`
      INSERT INTO end_users (organization_id, user_id, metadata)
      VALUES (${organizationId}, ${userId}, ${metadataJson})
      ON CONFLICT (organization_id, user_id) DO NOTHING
      RETURNING ${END_USER}, ${lent}`,
  );
  const entries = [
    inserted,
    webhookEventStep(inserted, { organizationId, type: 'end_user.created', at }),
  ];
  return withEntries(
    entries,
    CREATED_OR_GOT.query`SELECT ${CREATED_OR_GOT} FROM ${inserted.ref}
    UNION ALL
    SELECT false, ${END_USER} FROM end_users
     WHERE organization_id = ${organizationId} AND user_id = ${userId}
       AND NOT EXISTS (SELECT 1 FROM ${inserted.ref})`,
  );
}

export type ErasureMark = RowOf<typeof ERASURE_MARK>;

export type DueErasure = RowOf<typeof DUE_ERASURE>;

/**
 * The SQL of the end_users table. The single-statement paths run on the pool (create-or-get is
 * the hottest write of the API, named so PostgreSQL plans it once); the erasure's statements run
 * in the transaction they belong to.
 */
@Injectable()
export class EndUsersRepository {
  constructor(private readonly database: Database) {}

  /** The row, with `created` true when this statement inserted it; undefined in the rare race. */
  createOrGet(
    organizationId: string,
    userId: string,
    metadataJson: string,
    at: Date,
  ): Promise<RowOf<typeof CREATED_OR_GOT> | undefined> {
    return this.database.row(createOrGetStatement(organizationId, userId, metadataJson, at), {
      prepared: true,
    });
  }

  findByUserId(organizationId: string, userId: string): Promise<EndUserRow | undefined> {
    return this.database.row(
      END_USER.query`SELECT ${END_USER} FROM end_users
           WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
      { prepared: true },
    );
  }

  /** Ordered by user_id, `limit + 1` rows (the extra one tells whether more follow). */
  findPage(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<EndUserRow[]> {
    return this.database.rows(
      END_USER.query`SELECT ${END_USER} FROM end_users
           WHERE organization_id = ${organizationId}
             AND (${startingAfter ?? null}::text IS NULL OR user_id > ${startingAfter ?? null})
           ORDER BY user_id LIMIT ${limit + 1}`,
    );
  }

  /** Replaces the metadata of an active user; undefined when unknown or under deletion. */
  updateActiveMetadata(
    organizationId: string,
    userId: string,
    metadataJson: string,
    at: Date,
  ): Promise<EndUserRow | undefined> {
    return this.database.row(
      END_USER.query`UPDATE end_users SET metadata = ${metadataJson}, updated_at = ${at}
           WHERE organization_id = ${organizationId} AND user_id = ${userId} AND status = 'active'
           RETURNING ${END_USER}`,
    );
  }

  /**
   * Marks the user 'deleting', keeping an earlier schedule; undefined when unknown. The CTE reads
   * the status before the UPDATE, under its row lock: of concurrent calls exactly one sees
   * 'active'.
   */
  markForErasure(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    eraseAfter: Date,
    at: Date,
  ): Promise<ErasureMark | undefined> {
    return this.database.row(
      ERASURE_MARK.query`WITH before AS (
            SELECT id, status FROM end_users
             WHERE organization_id = ${organizationId} AND user_id = ${userId} FOR UPDATE)
          UPDATE end_users e
             SET status = 'deleting',
                 erase_after = COALESCE(e.erase_after, ${eraseAfter}::timestamptz),
                 updated_at = ${at}
            FROM before WHERE e.id = before.id
          RETURNING ${ERASURE_MARK}`,
      { manager },
    );
  }

  /** Database-wide; the partial index end_users_erasure_due_idx covers it. */
  async countDeleting(): Promise<number> {
    const row = await this.database.row(
      PENDING_COUNT.query`SELECT ${PENDING_COUNT} FROM end_users WHERE status = 'deleting'`,
    );
    return row?.pending ?? 0;
  }

  /**
   * Up to `limit` users due at `now`, locked for the caller's transaction; rows another
   * transaction holds are skipped, so two instances never claim the same user. Organizations take
   * turns: from `after` (the last organization the previous claim took from, by id, wrapping
   * around) each of the next ORGANIZATIONS_PER_CLAIM organizations with a user due gives its
   * longest-due one, then each its second, and so on, so one that erases ten thousand end users
   * at once does not keep another's single erasure waiting behind all of them (found by review;
   * the queue was first due, first erased). The organizations are found by index probes and each
   * gives at most `limit` × CANDIDATES_PER_SLOT candidates, so a claim reads a bounded number of rows however many are
   * due (end_users_erasure_due_by_organization_idx).
   */
  claimDue(
    manager: EntityManager,
    now: Date,
    limit: number,
    after: string | null = null,
  ): Promise<DueErasure[]> {
    // The first organization with a user due after `from` (or the first of all): an index probe.
    const nextDue = (from: Sql | null) =>
      sql`SELECT organization_id FROM end_users
           WHERE status = 'deleting' AND erase_after <= ${now}
             ${from ? sql`AND organization_id > ${from}` : empty}
           ORDER BY organization_id LIMIT 1`;
    return this.database.rows(
      DUE_ERASURE.query`WITH RECURSIVE
          after_cursor(organization_id, n) AS (
            SELECT (${nextDue(sql`${after}::uuid`)}), 1 WHERE ${after}::uuid IS NOT NULL
            UNION ALL
            SELECT (${nextDue(sql`a.organization_id`)}), a.n + 1
              FROM after_cursor a
             WHERE a.organization_id IS NOT NULL AND a.n < ${ORGANIZATIONS_PER_CLAIM}),
          from_first(organization_id, n) AS (
            SELECT (${nextDue(null)}), 1
            UNION ALL
            SELECT (${nextDue(sql`f.organization_id`)}), f.n + 1
              FROM from_first f
             WHERE f.organization_id IS NOT NULL
               AND (${after}::uuid IS NULL OR f.organization_id < ${after}::uuid)
               AND f.n < ${ORGANIZATIONS_PER_CLAIM}),
          visited AS (
            SELECT organization_id, row_number() OVER (ORDER BY lap, n) AS visit FROM (
              SELECT organization_id, 0 AS lap, n FROM after_cursor
               WHERE organization_id IS NOT NULL
              UNION ALL
              SELECT organization_id, 1 AS lap, n FROM from_first
               WHERE organization_id IS NOT NULL
                 AND (${after}::uuid IS NULL OR organization_id <= ${after}::uuid)) v
            ORDER BY lap, n
            LIMIT ${ORGANIZATIONS_PER_CLAIM}),
          candidate AS (
            SELECT c.id AS candidate, v.visit,
                   row_number() OVER (PARTITION BY v.organization_id
                                      ORDER BY c.erase_after, c.id) AS turn
              FROM visited v
              CROSS JOIN LATERAL (
                SELECT id, erase_after FROM end_users
                 WHERE organization_id = v.organization_id
                   AND status = 'deleting' AND erase_after <= ${now}
                 ORDER BY erase_after, id
                 LIMIT ${limit * CANDIDATES_PER_SLOT}) c),
          -- The best few, as a small set: the join below looks each one up by id (planned
          -- from the whole due set, it read every due row once statistics were taken).
          ranked AS MATERIALIZED (
            SELECT candidate, turn, visit FROM candidate
             ORDER BY turn, visit
             LIMIT ${limit * CANDIDATES_PER_SLOT})
        SELECT ${DUE_ERASURE}
          FROM ranked c
          JOIN end_users e ON e.id = c.candidate
         WHERE e.status = 'deleting' AND e.erase_after <= ${now}
         ORDER BY c.turn, c.visit
         LIMIT ${limit}
         FOR UPDATE OF e SKIP LOCKED`,
      { manager },
    );
  }

  /** Erasure: the row every other table refers to, last, once the others erased theirs. */
  @ErasesEndUsers({ order: ErasureOrder.END_USERS, tables: ['end_users'] })
  async eraseEndUsers(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    const ids = endUsers.map((endUser) => endUser.id);
    await this.database.count(sql`DELETE FROM end_users WHERE id = ANY(${ids}::uuid[])`, {
      manager,
    });
  }
}
