import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Columns } from '../database/columns';
import { Database } from '../database/database';
import { sql, withEntries } from '../database/sql';
import type { EndUser } from '../end-users/entities/end-user.entity';
import {
  endUserNamingStep,
  type NewEndUser,
  unnamedEndUserInsertStep,
} from '../end-users/end-users.step';
import { isUniqueViolation } from '../database/sql-state';
import type { Memory } from '../memory/entities/memory.entity';
import { factsInsertStep, type NewFact } from '../memory/facts.step';
import { memoriesInsertStep, type NewMemory } from '../memory/memories.step';
import { webhookEventStep } from '../webhooks/webhook-event.step';

const END_USER_ID = Columns.rowOf<EndUser>()('id');

const MEMORY_ID = Columns.rowOf<Memory>()('id');

const FACT_COUNT = Columns.computed<{ count: number }>({ count: sql`count(*)::int` });

/**
 * The statements of an import. It owns no table: the end user, its memories and facts are
 * written by the steps end-users lends (end-users.step.ts, memories.step.ts, facts.step.ts),
 * the `end_user.created` event by the webhooks' step, each statement in the import's transaction.
 */
@Injectable()
export class ImportRepository {
  constructor(private readonly database: Database) {}

  /** The new end user's id; it holds no user_id until nameEndUser (unnamedUserId). */
  async insertUnnamedEndUser(manager: EntityManager, endUser: NewEndUser): Promise<string> {
    const inserted = unnamedEndUserInsertStep(endUser);
    const row = await this.database.row(
      withEntries([inserted], END_USER_ID.query`SELECT ${END_USER_ID} FROM ${inserted.ref}`),
      { manager },
    );
    return row!.id;
  }

  /**
   * Gives the imported end user its user_id, with its `end_user.created` event; false when the
   * user_id is taken (the statement failed, and with it the transaction: the import is over).
   */
  async nameEndUser(manager: EntityManager, id: string, endUser: NewEndUser): Promise<boolean> {
    const named = endUserNamingStep(id, endUser.userId);
    const entries = [
      named,
      webhookEventStep(named, {
        organizationId: endUser.organizationId,
        type: 'end_user.created',
        at: endUser.updatedAt,
      }),
    ];
    try {
      await this.database.rows(
        withEntries(entries, END_USER_ID.query`SELECT ${END_USER_ID} FROM ${named.ref}`),
        { manager },
      );
      return true;
    } catch (error) {
      if (isUniqueViolation(error)) return false;
      throw error;
    }
  }

  /**
   * The memories, in the order given, in one statement; answers their new ids in that order.
   * The step inserts them ordered, so identities are drawn in that order and ascending ids are
   * the given order.
   */
  async insertMemories(manager: EntityManager, memories: NewMemory[]): Promise<string[]> {
    const inserted = memoriesInsertStep(memories);
    const rows = await this.database.rows(
      // bigint ids arrive as decimal strings; ordered as numbers, before they are text.
      withEntries(
        [inserted],
        MEMORY_ID.query`SELECT ${MEMORY_ID} FROM ${inserted.ref} ORDER BY id`,
      ),
      { manager },
    );
    return rows.map((row) => row.id);
  }

  /** How many facts were written. */
  async insertFacts(
    manager: EntityManager,
    target: { organizationId: string; endUserId: string },
    facts: NewFact[],
  ): Promise<number> {
    const inserted = factsInsertStep(target, facts);
    const row = await this.database.row(
      withEntries([inserted], FACT_COUNT.query`SELECT ${FACT_COUNT} FROM ${inserted.ref}`),
      { manager },
    );
    return row?.count ?? 0;
  }
}
