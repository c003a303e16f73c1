import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { KeyedLine } from '../common/concurrency/keyed-line';
import { Columns, type RowOf } from '../database/columns';
import { DEADLOCK_ATTEMPTS, Database } from '../database/database';
import { type Sql, sql, type WithEntry, withEntries } from '../database/sql';
import type { WebhookEndpoint } from '../webhooks/entities/webhook-endpoint.entity';
import type { ToolTurn } from './entities/tool-turn.entity';
import type { ToolTurnState } from './tool-turn-state';

/** Which pause of a turn a resumption answers: the calls it waited for, after how many rounds. */
export interface PausedAt {
  pending: readonly string[];
  rounds: number;
}

export interface NewToolTurn {
  id: string;
  organizationId: string;
  endUserId: string;
  personalityId: string;
  state: ToolTurnState;
  expiresAt: Date;
}

/** A turn as a resumption reads it: `expired` as of `now`. */
function foundTurnColumns(now: Date) {
  return Columns.propertiesOf<ToolTurn>()('status')
    .and(Columns.computed<{ expired: boolean }>({ expired: sql`expires_at <= ${now}` }))
    .and(Columns.propertiesOf<ToolTurn>()('personalityId', 'state'));
}

export type FoundToolTurn = RowOf<ReturnType<typeof foundTurnColumns>>;

const DELETED_COUNT = Columns.computed<{ count: number }>({ count: sql`count(*)::int` });

const TURN_ID = Columns.rowOf<ToolTurn>()('id');

const TURN_USER_ID = Columns.computed<{ userId: string }>({ userId: sql`e.user_id` });

/** What a webhook tool's call needs of its endpoint. */
const TOOL_ENDPOINT = Columns.rowOf<WebhookEndpoint>()('url', 'secret', 'status');

export type ToolEndpoint = RowOf<typeof TOOL_ENDPOINT>;

/**
 * The SQL of paused turns (`tool_turns`) and of the endpoints webhook tools call; every query is
 * scoped to the organization.
 */
@Injectable()
export class ToolTurnsRepository {
  /** The organization's pauses on this instance: they wait here, not on the lock. */
  private readonly pauses = new KeyedLine();

  constructor(private readonly database: Database) {}

  /**
   * Saves a paused turn, in one statement with `steps` (the tokens of its model calls so far). A
   * turn paused again after a resumption keeps its id: its row is pending once more. Of the
   * organization's other pending turns, the `keepPending - 1` paused last (by expiry, which each
   * pause sets) stay: the others end now, as if expired (their state emptied; a resumption of
   * one is 404), so that what one organization holds in paused turns is bounded whatever its
   * rate (found by review: half a megabyte a turn, for ten minutes each). Only those are locked,
   * not the ones kept (a lock writes its row), and one locked elsewhere (being claimed, or
   * erased) is skipped, not waited for: the bound holds again at the next pause. The
   * organization's pauses take their turn (an advisory lock held to the commit): each reads the
   * pauses committed before it, where concurrent ones each kept the turns the others were
   * adding (found by review: 20 at once kept 6 of a bound of 2). They queue on this instance
   * first, so that one connection at most per organization and instance waits on the lock, not
   * the pool's every one (found by the review of that change). The ids to end
   * are an array, looked up by key: as a subquery, a plan without statistics read every pending
   * turn of every organization to join them. Expired turns are deleted by
   * ToolTurnsRetentionWorker.
   */
  async save(
    turn: NewToolTurn,
    now: Date,
    keepPending: number,
    steps: WithEntry[] = [],
  ): Promise<void> {
    const ended = sql`turns_ended AS (
          UPDATE tool_turns SET expires_at = ${now}, state = NULL
           WHERE id IN (SELECT id FROM tool_turns
                         WHERE id = ANY (ARRAY(
                                 SELECT id FROM tool_turns
                                  WHERE organization_id = ${turn.organizationId}
                                    AND status = 'pending' AND expires_at > ${now}
                                    AND id <> ${turn.id}
                                  ORDER BY expires_at DESC, id DESC
                                 OFFSET ${keepPending - 1}))
                           AND organization_id = ${turn.organizationId} AND status = 'pending'
                         ORDER BY id
                           FOR NO KEY UPDATE SKIP LOCKED)
          RETURNING 1)`;
    const insert = sql`INSERT INTO tool_turns (id, organization_id, end_user_id, personality_id, state, expires_at)
          VALUES (${turn.id}, ${turn.organizationId}, ${turn.endUserId}, ${turn.personalityId},
                  ${JSON.stringify(turn.state)}::jsonb, ${turn.expiresAt})
          ON CONFLICT (id) DO UPDATE SET status = 'pending', state = excluded.state,
                                         expires_at = excluded.expires_at
           WHERE tool_turns.organization_id = excluded.organization_id`;
    const organization = turn.organizationId;
    await this.pauses.run(organization, () =>
      this.database.transaction(
        async (manager) => {
          await this.database.count(
            sql`SELECT pg_advisory_xact_lock(hashtextextended('tool-turns:' || ${organization}, 0))`,
            { manager },
          );
          await this.database.count(withEntries([...steps, ended], insert), { manager });
        },
        // Its token steps lock the end user's rollups, its turn checks the end user last: an
        // erasure locks them in the other order, as for a stored exchange (docs/database.md).
        { deadlockAttempts: DEADLOCK_ATTEMPTS },
      ),
    );
  }

  /**
   * Deletes up to `batchSize` turns past their expiry, of any organization (expired turns are
   * nobody's to resume), skipping rows another instance is deleting; answers how many.
   */
  async deleteExpired(now: Date, batchSize: number): Promise<number> {
    const row = await this.database.row(
      DELETED_COUNT.query`WITH doomed AS (
            SELECT id FROM tool_turns WHERE expires_at <= ${now}
             LIMIT ${batchSize} FOR UPDATE SKIP LOCKED),
          deleted AS (DELETE FROM tool_turns t USING doomed d WHERE t.id = d.id RETURNING 1)
          SELECT ${DELETED_COUNT} FROM deleted`,
    );
    return row?.count ?? 0;
  }

  async find(organizationId: string, id: string, now: Date): Promise<FoundToolTurn | undefined> {
    const found = foundTurnColumns(now);
    return this.database.row(
      found.query`SELECT ${found} FROM tool_turns WHERE id = ${id} AND organization_id = ${organizationId}`,
    );
  }

  /** The user_id of the end user a turn of the organization answers; undefined: no such turn. */
  async userIdOf(organizationId: string, id: string): Promise<string | undefined> {
    const row = await this.database.row(
      TURN_USER_ID.query`SELECT ${TURN_USER_ID} FROM tool_turns t
          JOIN end_users e ON e.id = t.end_user_id AND e.organization_id = t.organization_id
         WHERE t.id = ${id} AND t.organization_id = ${organizationId}`,
      { prepared: true },
    );
    return row?.userId;
  }

  /**
   * Takes a pending, unexpired turn for one resumption: a conditional UPDATE, so of concurrent
   * claims on any instances exactly one gets the row; the others get false. Only while the turn
   * is still the pause the claimer read (`paused`: its pending calls and its rounds): a turn
   * resumed and paused again meanwhile is pending once more, one round on, for calls whose ids a
   * provider may have used before.
   */
  async claim(organizationId: string, id: string, now: Date, paused: PausedAt): Promise<boolean> {
    const row = await this.database.row(
      TURN_ID.query`UPDATE tool_turns SET status = 'resumed'
           WHERE id = ${id} AND organization_id = ${organizationId}
             AND status = 'pending' AND expires_at > ${now}
             AND state->'pending' = ${JSON.stringify(paused.pending)}::jsonb
             AND state->'rounds' = ${JSON.stringify(paused.rounds)}::jsonb
          RETURNING ${TURN_ID}`,
    );
    return row !== undefined;
  }

  /**
   * A claimed turn whose resumption failed before its exchange was stored: pending again, in one
   * statement with `steps` (the tokens its model calls spent meanwhile).
   */
  async release(organizationId: string, id: string, steps: WithEntry[] = []): Promise<void> {
    const update = sql`UPDATE tool_turns SET status = 'pending'
           WHERE id = ${id} AND organization_id = ${organizationId} AND status = 'resumed'`;
    // Sent again after a deadlock, as a stored exchange is (RespondRepository#storeExchange).
    await this.database.count(steps.length > 0 ? withEntries(steps, update) : update, {
      deadlockAttempts: DEADLOCK_ATTEMPTS,
    });
  }

  /**
   * A WITH entry for the statement that stores a resumed turn's exchange: the turn is completed,
   * its state emptied, with the exchange or not at all.
   */
  completedStep(organizationId: string, id: string): Sql {
    return sql`tool_turn_completed AS (
      UPDATE tool_turns SET status = 'completed', state = NULL
       WHERE id = ${id} AND organization_id = ${organizationId} AND status = 'resumed')`;
  }

  /** The organization's webhook endpoint, read at each call: a changed URL or status counts. */
  findEndpoint(organizationId: string, id: string): Promise<ToolEndpoint | undefined> {
    return this.database.row(
      TOOL_ENDPOINT.query`SELECT ${TOOL_ENDPOINT} FROM webhook_endpoints
           WHERE id = ${id} AND organization_id = ${organizationId}`,
    );
  }

  /** In the erasure's transaction: the paused turns of these end users, scoped to their organizations. */
  async deleteOfEndUsers(
    manager: EntityManager,
    endUsers: ReadonlyArray<{ id: string; organizationId: string }>,
  ): Promise<void> {
    await this.database.count(
      sql`DELETE FROM tool_turns t
           USING unnest(${endUsers.map((u) => u.id)}::uuid[],
                        ${endUsers.map((u) => u.organizationId)}::uuid[]) AS e(id, organization_id)
           WHERE t.end_user_id = e.id AND t.organization_id = e.organization_id`,
      { manager },
    );
  }
}
