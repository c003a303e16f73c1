import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import { type Sql, sql } from '../database/sql';
import type { Row } from '../database/row';
import type { EndUser } from '../end-users/entities/end-user.entity';
import type { HistoryMemory, RecalledMemory } from './memories.repository';
import { type Meaning, memoryRanking } from './memory-search';

/** What a reply is written from, besides the personality (see findConversation). */
export interface ConversationMemory {
  /** The latest memories of the end user with the personality, oldest first. */
  history: HistoryMemory[];
  /** Every fact about the end user, oldest first. */
  facts: string[];
  /** Older memories most relevant to the new message, most relevant first. */
  recalled: RecalledMemory[];
}

/** The end user as a reply needs them: who, of which organization, and whether active. */
export type ConversationEndUser = Row<EndUser, 'id' | 'organizationId' | 'userId' | 'status'>;

/** The latest `limit` memories of the end user `e` with the personality, newest first. */
function latestMemories(personalityId: string, limit: number): Sql {
  return sql`SELECT id, role, content, emotion FROM memories
              WHERE end_user_id = e.id AND personality_id = ${personalityId}
              ORDER BY id DESC LIMIT ${limit}`;
}

/**
 * The reads of a reply's conversation: the end user with what a reply remembers of them, and
 * recall. They read end_users too, by (organization, user_id), so that a reply knows the end user
 * and its memories in one round trip.
 */
@Injectable()
export class ConversationRepository {
  constructor(private readonly database: Database) {}

  /**
   * The end user (undefined when unknown) and what a reply remembers of them besides recall: the
   * latest `historyLimit` memories with the personality and every fact. One row, the lists as
   * JSON arrays: a join would repeat the end user's columns on every memory row, and the driver
   * would parse each repeated timestamp again.
   */
  async findConversation(
    organizationId: string,
    userId: string,
    personalityId: string,
    historyLimit: number,
  ): Promise<{ endUser: ConversationEndUser | undefined } & Omit<ConversationMemory, 'recalled'>> {
    const row = await this.database.row<ConversationEndUser & Omit<ConversationMemory, 'recalled'>>(
      sql`SELECT e.id, e.organization_id, e.user_id, e.status,
                 COALESCE((
                   SELECT json_agg(json_build_object(
                            'role', h.role, 'content', h.content, 'emotion', h.emotion) ORDER BY h.id)
                     FROM (${latestMemories(personalityId, historyLimit)}) h), '[]') AS history,
                 COALESCE((
                   SELECT json_agg(f.content ORDER BY f.created_at, f.id)
                     FROM end_user_facts f WHERE f.end_user_id = e.id), '[]') AS facts
            FROM end_users e
           WHERE e.organization_id = ${organizationId} AND e.user_id = ${userId}`,
      { prepared: true },
    );
    if (!row) return { endUser: undefined, history: [], facts: [] };
    const { history, facts, ...endUser } = row;
    return { endUser, history, facts };
  }

  /**
   * Up to `limits.recall` memories of the end user with the personality, older than the latest
   * `limits.history` (the reply's history), that hold words of `message` (rankedMemories, the
   * full-text search of searchMemories), most relevant first; none for an unknown end user. Run
   * on its own within `timeoutMs` of database time (MEMORY_RECALL_TIMEOUT_MS): past it this
   * rejects with SQLSTATE 57014 and the reply goes on without.
   */
  recall(
    organizationId: string,
    userId: string,
    personalityId: string,
    message: string,
    limits: { history: number; recall: number },
    timeoutMs: number,
    meaning: Meaning | null,
  ): Promise<RecalledMemory[]> {
    const ranking = memoryRanking(
      {
        organizationId,
        endUserId: sql`e.id`,
        personalityId,
        before: sql`COALESCE((SELECT min(id) FROM (${latestMemories(personalityId, limits.history)}) l),
                             9223372036854775807)`,
        text: message,
        limit: limits.recall,
      },
      meaning,
    );
    return this.database.rowsWithin<RecalledMemory>(
      sql`SELECT m.role, m.content,
                 to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at
            FROM end_users e
           CROSS JOIN LATERAL (${ranking.rows}) r
            JOIN memories m ON m.id = r.id
           WHERE e.organization_id = ${organizationId} AND e.user_id = ${userId}
           ORDER BY ${ranking.order}`,
      timeoutMs,
      { prepared: true },
    );
  }
}
