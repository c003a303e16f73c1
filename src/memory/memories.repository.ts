import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Columns, type RowOf } from '../database/columns';
import { DEADLOCK_ATTEMPTS, Database } from '../database/database';
import type { PurgedBatch } from '../common/time/periodic-purge';
import { forgetEndUserAnswersStep } from '../idempotency/end-user-answers.step';
import { type Sql, sql } from '../database/sql';
import type { EndUser } from '../end-users/entities/end-user.entity';
import { type Meaning, memoryOfRanked, memoryRanking } from './memory-search';
import type { Row } from '../database/row';
import type { Memory } from './entities/memory.entity';
import {
  type ErasedEndUser,
  ErasesEndUsers,
  ErasesEndUsersInParts,
  ErasureOrder,
} from '../common/erasure/erasure-participant';

const END_USER_ID = Columns.rowOf<EndUser>()('id');

/** A memory `m` as a client sees it, its id as text. */
const MEMORY = Columns.computed<Row<Memory, 'id'>>({ id: sql`m.id::text` }).and(
  Columns.rowOf<Memory>('m')(
    'personalityId',
    'role',
    'content',
    'emotion',
    'intensity',
    'vocabularyVersion',
    'createdAt',
    'safety',
  ),
);

const TOOL_CALLS = Columns.rowOf<Memory>('m')('toolCalls');

const LISTED_MEMORY = MEMORY.and(TOOL_CALLS);

/** A memory as a client sees it; its tool calls where the statement reads them (a list does). */
export type MemoryRow = RowOf<typeof MEMORY> & Partial<RowOf<typeof TOOL_CALLS>>;

/**
 * A memory found by a search, as a list shows it (its tool calls too: a search answered a reply
 * that called tools with `tool_calls: null`, found by review), with its ranking's (`r`) score.
 */
const SCORED_MEMORY = LISTED_MEMORY.and(
  Columns.computed<{ score: number }>({ score: sql`r.score` }),
);

export type ScoredMemoryRow = RowOf<typeof SCORED_MEMORY>;

/** The most replies quoting a forgotten message that its deletion takes with it. */
const QUOTING_MAX = 100;

/** What forgetting a memory reads of it first: whether replies quote it, and how. */
const FORGOTTEN = Columns.rowOf<Memory>('m')('role', 'content');

/** How many memories the statement's `deleted` CTE removed. */
const DELETED = Columns.computed<{ deleted: number }>({ deleted: sql`count(*)::int` });

/** What a retention batch found due and deleted. */
/**
 * A retention batch: the memories due and deleted, and the organization it ended in, the last
 * one deleted from in the batch's order (the one after the previous batch's first).
 */
const RETENTION_BATCH = Columns.computed<{
  due: number;
  deleted: number;
  ended_in: string | null;
}>({
  due: sql`(SELECT count(*)::int FROM due)`,
  deleted: sql`(SELECT count(*)::int FROM deleted)`,
  ended_in: sql`(SELECT organization_id FROM ended)`,
});

/**
 * The words (postings) a retention batch deletes at most, its first memory whatever it holds:
 * the trigger deletes a memory's postings one probe per word (migration PostingsGoWithTheirMemory),
 * and 1,000 imported memories of 4,000 distinct words each ran past the statement timeout, so the
 * batch rolled back and, taking the same rows first, stalled the purge of every organization
 * (found by review). 20,000 probes are about 0.1 s here; 1,000 chat messages hold fewer.
 */
export const PURGE_WORDS_PER_BATCH = 20_000;

/** How many waiting rows memory_terms_trim_words let go (`w`). */
const LET_GO = Columns.computed<{ letGo: number }>({ letGo: sql`w.let_go` });

/**
 * The SQL of the memories table: as a client manages them (list, forget), and as an erasure
 * removes them. A reply appends them with memories.step.ts.
 */
@Injectable()
export class MemoriesRepository {
  constructor(private readonly database: Database) {}

  async findEndUserId(organizationId: string, userId: string): Promise<string | null> {
    const row = await this.database.row(
      END_USER_ID.query`SELECT ${END_USER_ID} FROM end_users
           WHERE organization_id = ${organizationId} AND user_id = ${userId}`,
    );
    return row?.id ?? null;
  }

  /** Newest first, `limit + 1` rows (the extra one tells whether more follow). */
  findPage(
    endUserId: string,
    filter: { personalityId?: string; before?: string },
    limit: number,
  ): Promise<MemoryRow[]> {
    const personalityId = filter.personalityId ?? null;
    const before = filter.before ?? null;
    return this.database.rows(
      // Ordered by the column, m.id: the output's `id` is text, and '9' sorts after '12'.
      LISTED_MEMORY.query`SELECT ${LISTED_MEMORY}
            FROM memories m
           WHERE m.end_user_id = ${endUserId}
             AND (${personalityId}::uuid IS NULL OR m.personality_id = ${personalityId})
             AND (${before}::bigint IS NULL OR m.id < ${before})
           ORDER BY m.id DESC
           LIMIT ${limit + 1}`,
    );
  }

  /**
   * The end user's memories most relevant to `text` (rankedMemories: the most words first, then
   * the newest, as contract §20 orders a search), each searched in its personality's language
   * (docs/memory.md); with `meaning`, fused with the ranking by embeddings (memoryRanking).
   */
  search(
    organizationId: string,
    endUserId: string,
    text: string,
    personalityId: string | null,
    limit: number,
    meaning: Meaning | null,
  ): Promise<ScoredMemoryRow[]> {
    return this.database.rows(
      memorySearchStatement(organizationId, endUserId, text, personalityId, limit, meaning),
      // Prepared, as recall's read is: planning this statement took longer than running it.
      { prepared: true },
    );
  }

  /**
   * Deletes the memory if it is this end user's, in this organization, the facts the engine
   * learned from it (they are what the message said) or that hold one of `quotations`, and the
   * personality's later replies in that conversation holding one of its `quotationsOf`
   * (memory-quote.ts: what a reply repeating it holds; a reply quoted a forgotten message on,
   * found by review); the reply to it keeps no record of its tool calls, whose arguments were
   * taken from the message (found by review). True when there was one.
   *
   * The end user's row is locked first (FOR NO KEY UPDATE, as a fact's writer takes it; a reply's
   * memories only share its key) in a statement of its own, so the deletion's snapshot is taken
   * after a concurrent forget of the same end user has committed: two forgets of two copies of a
   * message each saw the other copy still there, and the replies quoting them and the facts
   * holding their words outlived both (found by review). The row before any row this deletes:
   * an erasure claims it (FOR UPDATE) before it deletes facts, memories and keys, so the two meet
   * there, one waiting for the other, and never hold rows each other wait for (a deadlock).
   */
  deleteForEndUser(
    organizationId: string,
    userId: string,
    id: string,
    quotationsOf: (memory: RowOf<typeof FORGOTTEN>) => readonly string[],
  ): Promise<boolean> {
    return this.database.transaction(
      async (manager) => {
        const endUser = await this.database.row(
          END_USER_ID.query`SELECT ${END_USER_ID} FROM end_users
             WHERE organization_id = ${organizationId} AND user_id = ${userId}
               FOR NO KEY UPDATE`,
          { manager },
        );
        if (!endUser) return false;
        // Read under the lock, so what is looked for in replies is what is deleted.
        const memory = await this.database.row(
          FORGOTTEN.query`SELECT ${FORGOTTEN} FROM memories m
             WHERE m.id = ${id} AND m.end_user_id = ${endUser.id}`,
          { manager },
        );
        if (!memory) return false;
        const row = await this.database.row(
          this.deletion({ id: endUser.id, organizationId, userId }, id, quotationsOf(memory)),
          { manager },
        );
        return row?.deleted === 1;
      },
      // The retention purge locks a due memory, then the facts learned from it (ON DELETE SET
      // NULL); this may take the facts first. PostgreSQL rolls one of the two back: the purge's
      // batch runs at its next turn, and this runs again.
      { deadlockAttempts: DEADLOCK_ATTEMPTS },
    );
  }

  /** deleteForEndUser's statement, once the end user's row is locked. */
  private deletion(
    endUser: { id: string; organizationId: string; userId: string },
    id: string,
    quotations: readonly string[],
  ) {
    return DELETED.query`WITH doomed AS (
            SELECT m.id, m.end_user_id, m.personality_id, m.role, m.content, m.created_at
              FROM memories m
             WHERE m.id = ${id} AND m.end_user_id = ${endUser.id}),
          -- The end user's other messages saying the same: a reply or a fact may be theirs.
          copies AS MATERIALIZED (
            SELECT o.id, o.personality_id FROM memories o, doomed d
             WHERE cardinality(${quotations}::text[]) > 0
               AND o.end_user_id = d.end_user_id AND o.role = 'user'
               AND o.id <> d.id AND o.content = d.content),
          -- Along memories_conversation_idx: the conversation's replies after it, QUOTING_MAX at
          -- most (each deletion's postings cost a probe a word). None that a copy in the
          -- conversation older than the reply may be quoting: it stays. (Any copy, before:
          -- forgetting both copies oldest first left the replies between.)
          quoting AS (
            DELETE FROM memories WHERE id IN (
              SELECT r.id FROM memories r, doomed d
               WHERE cardinality(${quotations}::text[]) > 0
                 AND r.end_user_id = d.end_user_id AND r.personality_id = d.personality_id
                 AND r.id > d.id AND r.role = 'personality'
                 AND EXISTS (SELECT FROM unnest(${quotations}::text[]) q WHERE strpos(r.content, q) > 0)
                 AND NOT EXISTS (SELECT FROM copies c
                                  WHERE c.personality_id = d.personality_id AND c.id < r.id)
               ORDER BY r.id LIMIT ${QUOTING_MAX})
            RETURNING id),
          -- The reply to it, written with it (the same created_at, the conversation's next reply):
          -- its tool calls' arguments are the message's words, and their outputs answer them.
          unrecorded AS (
            UPDATE memories r SET tool_calls = NULL
              FROM doomed d
             WHERE d.role = 'user'
               AND r.id = (SELECT min(x.id) FROM memories x
                            WHERE x.end_user_id = d.end_user_id
                              AND x.personality_id = d.personality_id
                              AND x.id > d.id AND x.role = 'personality')
               AND r.created_at = d.created_at AND r.tool_calls IS NOT NULL
               AND r.id NOT IN (SELECT id FROM quoting)
            RETURNING 1),
          -- The facts learned from it, and those another exchange's engine learned holding its
          -- words (a model restates a message of its history: found by review), unless a copy
          -- of it is left (the fact may be that one's).
          learned AS (
            DELETE FROM end_user_facts f
             WHERE f.source = 'engine'
               AND (f.memory_id IN (SELECT id FROM doomed)
                    OR f.end_user_id IN (SELECT end_user_id FROM doomed)
                       AND NOT EXISTS (SELECT FROM copies)
                       AND EXISTS (SELECT FROM unnest(${quotations}::text[]) q
                                    WHERE strpos(f.content, q) > 0))
            RETURNING 1),
          deleted AS (DELETE FROM memories WHERE id IN (SELECT id FROM doomed) RETURNING 1),
          -- A stored answer (a keyed respond) may hold the memory: it goes with it.
          ${forgetEndUserAnswersStep('forgotten_answers', endUser.organizationId, [endUser.userId], sql`EXISTS (SELECT 1 FROM doomed)`)}
          -- learned is read here, so the facts are deleted (locked) before the idempotency keys,
          -- whose entries nothing reads and so run last: a fact's PATCH and DELETE lock them in
          -- that order, and another order could deadlock with them.
          SELECT ${DELETED} FROM deleted CROSS JOIN (SELECT count(*) FROM learned) facts_first
                 CROSS JOIN (SELECT count(*) FROM quoting) replies_too
                 CROSS JOIN (SELECT count(*) FROM unrecorded) calls_too`;
  }

  /**
   * Deletes up to `batchSize` memories older than their organization's retention at `now`, and
   * fewer when their words are many: those within PURGE_WORDS_PER_BATCH (the first one
   * whatever it holds). Only organizations with a retention are read (they are few), each through
   * memories_organization_created_idx, in turn: those after `after` (the organization the last
   * batch ended in) first, so that one organization's backlog (a retention lowered, an import of
   * old memories) takes a batch at a time and no other waits for all of it (found by review).
   * Rows another instance is deleting are skipped. Answers the organization this batch ended in.
   */
  async deletePastRetention(
    now: Date,
    batchSize: number,
    after: string | null = null,
  ): Promise<PurgedBatch & { endedIn: string | null }> {
    const row = await this.database.row(
      RETENTION_BATCH.query`WITH due AS (
            SELECT d.id, d.organization_id, d.work
              FROM (SELECT o.id, o.memory_retention_days FROM organizations o
                     WHERE o.memory_retention_days IS NOT NULL
                     ORDER BY o.id <= ${after}::uuid, o.id
                    OFFSET 0) o
             CROSS JOIN LATERAL (
               -- An end user an erasure holds is skipped (their row, FOR KEY SHARE SKIP LOCKED):
               -- the erasure deletes their facts before their memories, and a memory deleted
               -- here first would wait for those facts (its ON DELETE SET NULL) while the
               -- erasure waited for it, a deadlock.
               SELECT m.id, m.organization_id, length(m.search) + 1 AS work
                 FROM memories m JOIN end_users e ON e.id = m.end_user_id
                WHERE m.organization_id = o.id
                  AND m.created_at < ${now}::timestamptz - make_interval(days => o.memory_retention_days)
                LIMIT ${batchSize}
                  FOR UPDATE OF m SKIP LOCKED
                  FOR KEY SHARE OF e SKIP LOCKED) d
             LIMIT ${batchSize}),
          doomed AS (
            SELECT d.id, d.organization_id
              FROM (SELECT id, organization_id, work, sum(work) OVER (ORDER BY id) AS running
                      FROM due) d
             WHERE d.running - d.work < ${PURGE_WORDS_PER_BATCH}),
          deleted AS (DELETE FROM memories WHERE id IN (SELECT id FROM doomed) RETURNING 1),
          -- The last organization in the batch's order: those up to the given one came last.
          ended AS (
            SELECT organization_id FROM doomed
             ORDER BY organization_id <= ${after}::uuid DESC NULLS LAST, organization_id DESC
             LIMIT 1)
          SELECT ${RETENTION_BATCH}`,
    );
    const deleted = row?.deleted ?? 0;
    return {
      deleted,
      more: deleted < (row?.due ?? 0) || (row?.due ?? 0) >= batchSize,
      endedIn: row?.ended_in ?? null,
    };
  }

  /**
   * Trims the postings of the words of up to `batchSize` rows waiting in memory_terms_to_trim to
   * their newest 64 (memory_terms_trim_words, migration TrimPostingsInTheBackground); answers how
   * many rows it let go: those it took, less the words it wrote down again to look at once more.
   * Rows and postings another transaction holds are skipped.
   */
  async trimWaitingPostings(batchSize: number): Promise<number> {
    const row = await this.database.row(
      LET_GO.query`SELECT ${LET_GO} FROM memory_terms_trim_words(${batchSize}::int) AS w(let_go)`,
    );
    return row?.letGo ?? 0;
  }

  /**
   * Erasure, ahead of its transaction: up to `rows` memories of these end users, each with its
   * postings (the trigger: a primary-key probe a word), its embedding (the cascade), and its
   * facts' link to it (set null). Each end user's are read along memories_end_user_idx and
   * deleted by primary key (an array of ids, not a join a plan could make a scan), so no plan
   * reads the table whole however few statistics it has.
   */
  @ErasesEndUsersInParts({
    tables: ['memory_terms', 'memory_embeddings', 'memories', 'end_user_facts'],
  })
  eraseEndUsersInParts(
    manager: EntityManager,
    endUsers: readonly ErasedEndUser[],
    rows: number,
  ): Promise<number> {
    const endUserIds = endUsers.map((endUser) => endUser.id);
    return this.database.count(
      sql`DELETE FROM memories WHERE id = ANY (ARRAY(
            SELECT m.id FROM unnest(${endUserIds}::uuid[]) AS u(id)
             CROSS JOIN LATERAL (SELECT id FROM memories
                                  WHERE end_user_id = u.id ORDER BY id LIMIT ${rows}) m
             LIMIT ${rows}))`,
      { manager },
    );
  }

  /** Erasure: every memory of these end users (what eraseEndUsersInParts left). */
  @ErasesEndUsers({
    order: ErasureOrder.DATA,
    tables: ['memory_terms', 'memory_terms_to_trim', 'memory_embeddings', 'memories'],
  })
  async eraseEndUsers(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    const endUserIds = endUsers.map((endUser) => endUser.id);
    // Their terms and embeddings first, by their end user: the trigger and the cascade from each
    // memory would look them up memory by memory.
    await this.database.count(
      sql`DELETE FROM memory_terms WHERE end_user_id = ANY(${endUserIds}::uuid[])`,
      { manager },
    );
    await this.database.count(
      sql`DELETE FROM memory_terms_to_trim WHERE end_user_id = ANY(${endUserIds}::uuid[])`,
      { manager },
    );
    await this.database.count(
      sql`DELETE FROM memory_embeddings WHERE end_user_id = ANY(${endUserIds}::uuid[])`,
      { manager },
    );
    await this.database.count(
      sql`DELETE FROM memories WHERE end_user_id = ANY(${endUserIds}::uuid[])`,
      { manager },
    );
  }
}

/** MemoriesRepository.search's statement (src/queries/statements.ts shows it by meaning). */
export function memorySearchStatement(
  organizationId: string,
  endUserId: string,
  text: string,
  personalityId: string | null,
  limit: number,
  meaning: Meaning | null,
): Sql<ScoredMemoryRow> {
  const ranking = memoryRanking(
    {
      organizationId,
      endUserId: sql`${endUserId}::uuid`,
      personalityId,
      text,
      limit,
      tiesNewestFirst: true,
    },
    meaning,
  );
  // Indented as it was inside the method: the statement's text, and so its name, stay the same.
  return SCORED_MEMORY.query`SELECT ${SCORED_MEMORY}
            FROM (${ranking.rows}) r
            ${memoryOfRanked(sql`m.end_user_id = ${endUserId}::uuid
               AND m.organization_id = ${organizationId}
               AND (${personalityId}::uuid IS NULL OR m.personality_id = ${personalityId}::uuid)`)}
           ORDER BY ${ranking.order}`;
}
