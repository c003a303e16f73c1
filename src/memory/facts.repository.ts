import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Columns, type RowOf } from '../database/columns';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { forgetEndUserAnswersStep } from '../idempotency/end-user-answers.step';
import { sql } from '../database/sql';
import type { Row } from '../database/row';
import type { EndUser } from '../end-users/entities/end-user.entity';
import type { Fact, FactSource } from './entities/fact.entity';
import {
  type ErasedEndUser,
  ErasesEndUsers,
  ErasureOrder,
} from '../common/erasure/erasure-participant';

const FACT = Columns.rowOf<Fact>()('id', 'content', 'source')
  .and(Columns.computed<Row<Fact, 'memoryId'>>({ memory_id: sql`memory_id::text` }))
  .and(Columns.rowOf<Fact>()('createdAt', 'updatedAt'));

export type FactRow = RowOf<typeof FACT>;

const LOCKED_END_USER = Columns.rowOf<EndUser>()('status', 'eraseAfter');

const FACTS_HELD = Columns.computed<{ facts: number }>({ facts: sql`count(*)::int` });

/** How many facts the statement's `deleted` CTE removed. */
const DELETED = Columns.computed<{ deleted: number }>({ deleted: sql`count(*)::int` });

/** The SQL of end_user_facts (a reply's learned facts are written by facts.step.ts). */
@Injectable()
export class FactsRepository {
  constructor(private readonly database: Database) {}

  /**
   * Takes the end user's fact lock (their row, FOR NO KEY UPDATE: memories may still be
   * written beside it) for the transaction; answers the user's status and how many facts they
   * hold, counted after the lock, so concurrent writers of facts see each other's.
   */
  async lockForFacts(
    manager: EntityManager,
    endUserId: string,
  ): Promise<RowOf<typeof LOCKED_END_USER> & RowOf<typeof FACTS_HELD>> {
    const locked = await this.database.row(
      LOCKED_END_USER.query`SELECT ${LOCKED_END_USER} FROM end_users
           WHERE id = ${endUserId} FOR NO KEY UPDATE`,
      { manager },
    );
    const counted = await this.database.row(
      FACTS_HELD.query`SELECT ${FACTS_HELD} FROM end_user_facts WHERE end_user_id = ${endUserId}`,
      { manager },
    );
    return { ...locked!, facts: counted!.facts };
  }

  findByKey(
    manager: EntityManager,
    endUserId: string,
    contentKey: string,
  ): Promise<FactRow | undefined> {
    return this.database.row(
      FACT.query`SELECT ${FACT} FROM end_user_facts
           WHERE end_user_id = ${endUserId} AND content_key = ${contentKey}`,
      { manager },
    );
  }

  async insert(
    manager: EntityManager,
    fact: {
      organizationId: string;
      endUserId: string;
      content: string;
      contentKey: string;
      source: FactSource;
      at: Date;
    },
  ): Promise<FactRow> {
    const row = await this.database.row(
      FACT.query`INSERT INTO end_user_facts
            (organization_id, end_user_id, content, content_key, source, created_at, updated_at)
          VALUES (${fact.organizationId}, ${fact.endUserId}, ${fact.content}, ${fact.contentKey},
                  ${fact.source}, ${fact.at}, ${fact.at})
          RETURNING ${FACT}`,
      { manager },
    );
    return row!;
  }

  /**
   * Undefined when the end user has no such fact. The organization's stored answers about the end
   * user go in the same statement, as with a deletion: a keyed creation of the fact holds its old
   * content, which a replay would answer and subject access show for a day (found by review).
   */
  update(
    manager: EntityManager,
    endUser: { id: string; organizationId: string; userId: string },
    id: string,
    change: { content: string; contentKey: string; at: Date },
  ): Promise<FactRow | undefined> {
    return this.database.row(
      FACT.query`WITH updated AS (
            UPDATE end_user_facts
               SET content = ${change.content}, content_key = ${change.contentKey},
                   -- Never before its creation, whatever this instance's clock says.
                   updated_at = GREATEST(created_at, ${change.at}::timestamptz)
             WHERE id = ${id} AND end_user_id = ${endUser.id}
            RETURNING *),
          ${forgetEndUserAnswersStep('forgotten_answers', endUser.organizationId, [endUser.userId], sql`EXISTS (SELECT 1 FROM updated)`)}
          SELECT ${FACT} FROM updated`,
      { manager },
    );
  }

  /**
   * Deletes the fact, and the organization's stored answers about the end user `userId` (a
   * keyed fact creation holds its content), in one statement.
   */
  async delete(
    endUser: { id: string; organizationId: string; userId: string },
    id: string,
  ): Promise<boolean> {
    const row = await this.database.row(
      DELETED.query`WITH deleted AS (
            DELETE FROM end_user_facts WHERE id = ${id} AND end_user_id = ${endUser.id}
            RETURNING 1),
          ${forgetEndUserAnswersStep('forgotten_answers', endUser.organizationId, [endUser.userId], sql`EXISTS (SELECT 1 FROM deleted)`)}
          SELECT ${DELETED} FROM deleted`,
    );
    return row?.deleted === 1;
  }

  /** Newest first, `limit + 1` rows after the fact `startingAfter` of the same end user. */
  findPage(
    endUserId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<FactRow[]> {
    const page: Keyset = {
      table: 'end_user_facts',
      cursor: startingAfter,
      scope: { end_user_id: endUserId },
      order: 'desc',
    };
    return this.database.rows(
      FACT.query`SELECT ${FACT} FROM end_user_facts
           WHERE end_user_id = ${endUserId} AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  /**
   * Erasure: every fact of these end users, before the memories they name (which would
   * otherwise set their memory_id to null).
   */
  @ErasesEndUsers({ order: ErasureOrder.REFERRERS, tables: ['end_user_facts'] })
  async eraseEndUsers(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    await this.database.count(
      sql`DELETE FROM end_user_facts WHERE end_user_id = ANY(${endUsers.map((e) => e.id)}::uuid[])`,
      { manager },
    );
  }
}
