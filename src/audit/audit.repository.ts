import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { Columns, type RowOf } from '../database/columns';
import { empty, type Sql, sql } from '../database/sql';
import type { AuditOrigin } from './audit-event.step';
import type { AuditEvent } from './entities/audit-event.entity';
import { ERASED_TARGET_ID } from './erased-target';

const EVENT = Columns.rowOf<AuditEvent>()(
  'id',
  'action',
  'actorType',
  'actorId',
  'targetType',
  'targetId',
  'ip',
  'requestId',
  'details',
  'createdAt',
);

export type AuditEventRow = RowOf<typeof EVENT>;

export interface NewAuditEvent extends AuditOrigin {
  targetId: string;
  details: Record<string, unknown>;
}

/** The INSERT of one event; `condition` (a WHERE clause) may keep it from being written. */
function insertEvent(event: NewAuditEvent, condition: Sql = empty): Sql {
  return sql`INSERT INTO audit_events
      (organization_id, action, actor_type, actor_id, target_type, target_id, ip, request_id, details,
       created_at)
    SELECT ${event.organizationId}::uuid, ${event.action}::text, ${event.actorType}::text,
           ${event.actorId}::text, ${event.targetType}::text, ${event.targetId}::text,
           ${event.ip}::text, ${event.requestId}::text, ${JSON.stringify(event.details)}::jsonb,
           ${event.at}::timestamptz
    ${condition}`;
}

/** The SQL of the audit log (the step other statements carry is audit-event.step.ts). */
@Injectable()
export class AuditRepository {
  constructor(private readonly database: Database) {}

  /** In the caller's transaction: the event commits or rolls back with the change. */
  async insert(manager: EntityManager, event: NewAuditEvent): Promise<void> {
    await this.database.count(insertEvent(event), { manager });
  }

  /**
   * As insert, unless the organization's log already holds this action on this target. Only for
   * an action that happens once per target, whose concurrent repeats serialize on the target's
   * own row before they get here (so the later one sees the earlier one's event).
   */
  async insertUnlessRecorded(manager: EntityManager, event: NewAuditEvent): Promise<void> {
    await this.database.count(
      insertEvent(
        event,
        sql`WHERE NOT EXISTS (
              SELECT 1 FROM audit_events
               WHERE organization_id = ${event.organizationId}::uuid
                 AND action = ${event.action}::text AND target_id = ${event.targetId}::text)`,
      ),
      { manager },
    );
  }

  /**
   * Newest first, paged by the id of the last event seen, optionally of one action: then through
   * audit_events_organization_action_idx, whose order is the page's (a rare action among a large
   * tenant's events read the organization's whole log before: found by review).
   */
  findPageForOrganization(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
    action: string | undefined,
  ): Promise<AuditEventRow[]> {
    const page: Keyset = {
      table: 'audit_events',
      cursor: startingAfter,
      scope: { organization_id: organizationId },
      order: 'desc',
    };
    return this.database.rows(
      EVENT.query`SELECT ${EVENT}
            FROM audit_events
           WHERE organization_id = ${organizationId}
             ${action === undefined ? empty : sql`AND action = ${action}`}
             AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  /**
   * In the erasure's transaction: the events whose target is one of these end users stop naming
   * them.
   */
  async redactEndUserTargets(
    manager: EntityManager,
    endUsers: ReadonlyArray<{ organizationId: string; userId: string }>,
  ): Promise<void> {
    await this.database.count(
      sql`UPDATE audit_events a SET target_id = ${ERASED_TARGET_ID}
            FROM unnest(${endUsers.map((e) => e.organizationId)}::uuid[],
                        ${endUsers.map((e) => e.userId)}::text[]) AS erased(organization_id, user_id)
           WHERE a.organization_id = erased.organization_id AND a.target_type = 'end_user'
             AND a.target_id = erased.user_id`,
      { manager },
    );
  }

  /**
   * Deletes up to `batchSize` events created before `cutoff`, answering how many. Rows another
   * instance is deleting at the same moment are skipped (SKIP LOCKED), so any number of instances
   * may purge at once without waiting on each other or deleting a row twice; each batch is one
   * short statement, so a large backlog never holds a long transaction.
   */
  async deleteCreatedBefore(cutoff: Date, batchSize: number): Promise<number> {
    return this.database.count(
      sql`WITH doomed AS (
            SELECT id FROM audit_events WHERE created_at < ${cutoff} LIMIT ${batchSize}
               FOR UPDATE SKIP LOCKED)
          DELETE FROM audit_events WHERE id IN (SELECT id FROM doomed)`,
    );
  }
}
