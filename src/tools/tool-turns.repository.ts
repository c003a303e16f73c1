import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import { sql } from '../database/sql';
import type { ToolTurnStatus } from './entities/tool-turn.entity';
import type { ToolTurnState } from './tool-turn-state';

export interface NewToolTurn {
  id: string;
  organizationId: string;
  endUserId: string;
  personalityId: string;
  state: ToolTurnState;
  expiresAt: Date;
}

export interface FoundToolTurn {
  status: ToolTurnStatus;
  expired: boolean;
  personalityId: string;
  state: ToolTurnState;
}

/** The SQL of paused turns (`tool_turns`); every query is scoped to the organization. */
@Injectable()
export class ToolTurnsRepository {
  constructor(private readonly database: Database) {}

  async insert(turn: NewToolTurn): Promise<void> {
    await this.database.rows(
      sql`INSERT INTO tool_turns (id, organization_id, end_user_id, personality_id, state, expires_at)
          VALUES (${turn.id}, ${turn.organizationId}, ${turn.endUserId}, ${turn.personalityId},
                  ${JSON.stringify(turn.state)}::jsonb, ${turn.expiresAt})`,
    );
  }

  async find(organizationId: string, id: string, now: Date): Promise<FoundToolTurn | undefined> {
    return this.database.row<FoundToolTurn>(
      sql`SELECT status, expires_at <= ${now} AS expired, personality_id AS "personalityId", state
            FROM tool_turns WHERE id = ${id} AND organization_id = ${organizationId}`,
    );
  }

  /**
   * Takes a pending, unexpired turn for one resumption: a conditional UPDATE, so of concurrent
   * claims on any instances exactly one gets the row; the others get false.
   */
  async claim(organizationId: string, id: string, now: Date): Promise<boolean> {
    const row = await this.database.row<{ id: string }>(
      sql`UPDATE tool_turns SET status = 'resumed'
           WHERE id = ${id} AND organization_id = ${organizationId}
             AND status = 'pending' AND expires_at > ${now}
          RETURNING id`,
    );
    return row !== undefined;
  }
}
