import { Injectable } from '@nestjs/common';
import { Columns, type RowOf } from '../database/columns';
import { Database } from '../database/database';
import { raw, type Sql, sql } from '../database/sql';
import type { Row } from '../database/row';
import type { EndUser } from '../end-users/entities/end-user.entity';
import type { Memory } from './entities/memory.entity';
import { type Meaning, memoryOfRanked, memoryRanking } from './memory-search';
import { isoTime } from '../database/iso-time';

/** A memory of the reply's recent history, as the engine is sent it. */
export type HistoryMemory = Row<Memory, 'role' | 'content' | 'emotion'>;

/** The date of a memory `m`, ISO 8601, rendered by the query. */
const MEMORY_DATE = isoTime('m.created_at');

/** An older memory `m` recalled into a reply, with its date. */
const RECALLED_MEMORY = Columns.rowOf<Memory>('m')('role', 'content').and(
  Columns.computed<{ created_at: string }>({ created_at: MEMORY_DATE }),
);

export type RecalledMemory = RowOf<typeof RECALLED_MEMORY>;

/** What a reply is written from, besides the personality (see findConversation). */
export interface ConversationMemory {
  /** The latest memories of the end user with the personality, oldest first. */
  history: HistoryMemory[];
  /** Every fact about the end user, oldest first. */
  facts: string[];
  /** Older memories most relevant to the new message, most relevant first. */
  recalled: RecalledMemory[];
}

/** The end user `e` as a reply needs them: who, of which organization, and whether active. */
const CONVERSATION_END_USER = Columns.rowOf<EndUser>('e')(
  'id',
  'organizationId',
  'userId',
  'status',
);

export type ConversationEndUser = RowOf<typeof CONVERSATION_END_USER>;

/**
 * The latest `limit` memories of the end user `e` with the personality, newest first, by the
 * function latest_memories: an index scan stopped at `limit` whatever the statistics say
 * (migrations LatestMemoriesByIndex, LatestMemoriesPlannedOnce). The limit
 * (ENGINE_HISTORY_MESSAGES, a setting) is written into the text, not sent as a parameter, so the
 * statement's generic plan is the one a custom plan would be (bench memory-scale: 1,050 custom
 * plans, no generic one, under a parameter).
 */
function latestMemories(personalityId: string, limit: number): Sql {
  if (!Number.isSafeInteger(limit) || limit < 0) {
    throw new RangeError(`history limit must be a whole number >= 0, not ${limit}`);
  }
  return sql`SELECT id, role, content, emotion
               FROM latest_memories(e.id, ${personalityId}::uuid, ${raw(String(limit))})`;
}

/**
 * The latest memories of the end user `e` with the personality as the lateral row `h`: `history`,
 * their JSON array oldest first (null for none), and `bound`, the oldest one's id, below which
 * recall reads. One read of latest_memories serves both.
 */
function latest(personalityId: string, historyLimit: number): Sql {
  return sql`CROSS JOIN LATERAL (
               SELECT json_agg(json_build_object(
                        'role', l.role, 'content', l.content, 'emotion', l.emotion) ORDER BY l.id)
                        AS history,
                      min(l.id) AS bound
                 FROM (${latestMemories(personalityId, historyLimit)}) l) h`;
}

/** What a reply remembers of the end user `e` besides recall, from `latest`'s row `h`. */
const REMEMBERED = Columns.computed<Omit<ConversationMemory, 'recalled'>>({
  history: sql`COALESCE(h.history, '[]')`,
  facts: sql`COALESCE((
               SELECT json_agg(f.content ORDER BY f.created_at, f.id)
                 FROM end_user_facts f WHERE f.end_user_id = e.id), '[]')`,
});

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
    const columns = CONVERSATION_END_USER.and(REMEMBERED);
    const row = await this.database.row(
      columns.query`SELECT ${columns}
            FROM end_users e ${latest(personalityId, historyLimit)}
           WHERE e.organization_id = ${organizationId} AND e.user_id = ${userId}`,
      { prepared: true },
    );
    if (!row) return { endUser: undefined, history: [], facts: [] };
    const { history, facts, ...endUser } = row;
    return { endUser, history, facts };
  }

  /**
   * findConversation and recall (below) in one statement and one round trip, run within
   * `timeoutMs` of database time: past it this rejects with SQLSTATE 57014 and the caller reads
   * the conversation again without recall. For ranking by words alone: with embeddings on, the
   * conversation is read while the message is embedded, recall once it is.
   */
  async findConversationRecalling(
    organizationId: string,
    userId: string,
    personalityId: string,
    message: string,
    limits: { history: number; recall: number },
    timeoutMs: number,
  ): Promise<{ endUser: ConversationEndUser | undefined } & ConversationMemory> {
    const ranking = recallRanking(
      organizationId,
      personalityId,
      message,
      limits,
      null,
      sql`h.bound`,
    );
    const columns = CONVERSATION_END_USER.and(REMEMBERED).and(
      Columns.computed<Pick<ConversationMemory, 'recalled'>>({
        recalled: sql`COALESCE((
                        SELECT json_agg(json_build_object(
                                 'role', m.role, 'content', m.content, 'created_at', ${MEMORY_DATE})
                                 ORDER BY ${ranking.order})
                          FROM (${ranking.rows}) r ${conversationMemory(personalityId)}), '[]')`,
      }),
    );
    const [row] = await this.database.rowsWithin(
      columns.query`SELECT ${columns}
            FROM end_users e ${latest(personalityId, limits.history)}
           WHERE e.organization_id = ${organizationId} AND e.user_id = ${userId}`,
      timeoutMs,
      { prepared: true },
    );
    if (!row) return { endUser: undefined, history: [], facts: [], recalled: [] };
    const { history, facts, recalled, ...endUser } = row;
    return { endUser, history, facts, recalled };
  }

  /**
   * Up to `limits.recall` memories of the end user with the personality, older than the latest
   * `limits.history` (the reply's history), that hold words of `message` (rankedMemories, the
   * full-text search of searchMemories) or are near it in meaning, most relevant first; none for
   * an unknown end user. Run on its own within `timeoutMs` of database time
   * (MEMORY_RECALL_TIMEOUT_MS): past it this rejects with SQLSTATE 57014 and the reply goes on
   * without.
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
    return this.database.rowsWithin(
      recallStatement(organizationId, userId, personalityId, message, limits, meaning),
      timeoutMs,
      { prepared: true },
    );
  }
}

/** ConversationRepository.recall's statement (src/queries/statements.ts shows it by meaning). */
export function recallStatement(
  organizationId: string,
  userId: string,
  personalityId: string,
  message: string,
  limits: { history: number; recall: number },
  meaning: Meaning | null,
): Sql<RecalledMemory> {
  const ranking = recallRanking(organizationId, personalityId, message, limits, meaning);
  // Indented as it was inside the method: the statement's text, and so its name, stay the same.
  return RECALLED_MEMORY.query`SELECT ${RECALLED_MEMORY}
            FROM end_users e
           CROSS JOIN LATERAL (${ranking.rows}) r
           ${conversationMemory(personalityId)}
           WHERE e.organization_id = ${organizationId} AND e.user_id = ${userId}
           ORDER BY ${ranking.order}`;
}

/** Recall's ranking of the end user `e`'s older memories with the personality (see recall). */
function recallRanking(
  organizationId: string,
  personalityId: string,
  message: string,
  limits: { history: number; recall: number },
  meaning: Meaning | null,
  /** The oldest id of the history when the statement has read it (`latest`); else read here. */
  historyBound: Sql = sql`(SELECT min(id) FROM (${latestMemories(personalityId, limits.history)}) l)`,
): { rows: Sql; order: Sql } {
  return memoryRanking(
    {
      organizationId,
      endUserId: sql`e.id`,
      personalityId,
      before: sql`COALESCE(${historyBound}, 9223372036854775807)`,
      text: message,
      limit: limits.recall,
    },
    meaning,
  );
}

/** The memory `m` of a ranked memory `r`, checked to be the conversation's (memoryOfRanked). */
function conversationMemory(personalityId: string): Sql {
  return memoryOfRanked(sql`m.end_user_id = e.id AND m.personality_id = ${personalityId}`);
}
