import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { forgetEndUserAnswersStep } from '../idempotency/end-user-answers.step';
import { raw, sql } from '../database/sql';
import type { FactRow } from './dto/fact.dto';
import type { FactSource } from './entities/fact.entity';
import {
  type ErasedEndUser,
  ErasesEndUsers,
  ErasureOrder,
} from '../common/erasure/erasure-participant';

const COLUMNS = raw('id, content, source, memory_id::text AS memory_id, created_at, updated_at');

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
  ): Promise<{ status: string; erase_after: Date | null; facts: number }> {
    const locked = await this.database.row<{ status: string; erase_after: Date | null }>(
      sql`SELECT status, erase_after FROM end_users WHERE id = ${endUserId} FOR NO KEY UPDATE`,
      { manager },
    );
    const counted = await this.database.row<{ facts: number }>(
      sql`SELECT count(*)::int AS facts FROM end_user_facts WHERE end_user_id = ${endUserId}`,
      { manager },
    );
    return { ...locked!, facts: counted!.facts };
  }

  findByKey(
    manager: EntityManager,
    endUserId: string,
    contentKey: string,
  ): Promise<FactRow | undefined> {
    return this.database.row<FactRow>(
      sql`SELECT ${COLUMNS} FROM end_user_facts
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
    const row = await this.database.row<FactRow>(
      sql`INSERT INTO end_user_facts
            (organization_id, end_user_id, content, content_key, source, created_at, updated_at)
          VALUES (${fact.organizationId}, ${fact.endUserId}, ${fact.content}, ${fact.contentKey},
                  ${fact.source}, ${fact.at}, ${fact.at})
          RETURNING ${COLUMNS}`,
      { manager },
    );
    return row!;
  }

  /** Undefined when the end user has no such fact. */
  update(
    manager: EntityManager,
    endUserId: string,
    id: string,
    change: { content: string; contentKey: string; at: Date },
  ): Promise<FactRow | undefined> {
    return this.database.row<FactRow>(
      sql`UPDATE end_user_facts
             SET content = ${change.content}, content_key = ${change.contentKey},
                 updated_at = ${change.at}
           WHERE id = ${id} AND end_user_id = ${endUserId}
          RETURNING ${COLUMNS}`,
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
    const row = await this.database.row<{ deleted: number }>(
      sql`WITH deleted AS (
            DELETE FROM end_user_facts WHERE id = ${id} AND end_user_id = ${endUser.id}
            RETURNING 1),
          ${forgetEndUserAnswersStep('forgotten_answers', endUser.organizationId, [endUser.userId], sql`EXISTS (SELECT 1 FROM deleted)`)}
          SELECT count(*)::int AS deleted FROM deleted`,
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
    return this.database.rows<FactRow>(
      sql`SELECT ${COLUMNS} FROM end_user_facts
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
    await this.database.rows(
      sql`DELETE FROM end_user_facts WHERE end_user_id = ANY(${endUsers.map((e) => e.id)}::uuid[])`,
      { manager },
    );
  }
}
