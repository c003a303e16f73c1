import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';

export interface AuditEventRow {
  id: string;
  action: string;
  actor_type: string;
  actor_id: string;
  target_type: string;
  target_id: string;
  ip: string | null;
  request_id: string | null;
  details: Record<string, unknown>;
  created_at: Date;
}

export interface NewAuditEvent {
  organizationId: string;
  action: string;
  actorType: string;
  actorId: string;
  targetType: string;
  targetId: string;
  ip: string | null;
  requestId: string | null;
  details: Record<string, unknown>;
}

/** What an erased end user's id becomes in the events that named them. */
export const ERASED_TARGET_ID = '[erased]';

/** The SQL of the audit log. */
@Injectable()
export class AuditRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** In the caller's transaction: the event commits or rolls back with the change. */
  async insert(manager: EntityManager, event: NewAuditEvent): Promise<void> {
    await manager.query(
      `INSERT INTO audit_events
         (organization_id, action, actor_type, actor_id, target_type, target_id, ip, request_id, details)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [
        event.organizationId,
        event.action,
        event.actorType,
        event.actorId,
        event.targetType,
        event.targetId,
        event.ip,
        event.requestId,
        JSON.stringify(event.details),
      ],
    );
  }

  /**
   * A data-modifying CTE step that writes one event per row of the CTE named `source`, which must
   * return `audit_target_id` (text) and `audit_details` (jsonb); the other fields are parameters
   * `$firstParam`… (answered in `params`). Put in the statement that makes the change, it commits
   * or rolls back with it: the same transaction in one round trip.
   */
  eventStep(
    source: string,
    firstParam: number,
    fields: Omit<NewAuditEvent, 'targetId' | 'details'>,
  ): { sql: string; params: unknown[] } {
    const p = (offset: number) => `$${firstParam + offset}`;
    return {
      sql: `audit_event AS (
        INSERT INTO audit_events
          (organization_id, action, actor_type, actor_id, target_type, target_id, ip, request_id, details)
        SELECT ${p(0)}::uuid, ${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, s.audit_target_id, ${p(5)}, ${p(6)}, s.audit_details
          FROM ${source} s)`,
      params: [
        fields.organizationId,
        fields.action,
        fields.actorType,
        fields.actorId,
        fields.targetType,
        fields.ip,
        fields.requestId,
      ],
    };
  }

  /** Newest first, paged by the id of the last event seen, optionally of one action. */
  findPageForOrganization(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
    action: string | undefined,
  ): Promise<AuditEventRow[]> {
    return this.dataSource.query(
      `SELECT id, action, actor_type, actor_id, target_type, target_id, ip, request_id, details, created_at
         FROM audit_events
        WHERE organization_id = $1
          AND ($2::text IS NULL OR action = $2)
          AND ($3::uuid IS NULL OR (created_at, id) < (
                SELECT a2.created_at, a2.id FROM audit_events a2
                 WHERE a2.id = $3::uuid AND a2.organization_id = $1))
        ORDER BY created_at DESC, id DESC
        LIMIT $4`,
      [organizationId, action ?? null, startingAfter ?? null, limit + 1],
    );
  }

  /**
   * In the erasure's transaction: the events whose target is one of these end users stop naming
   * them.
   */
  async redactEndUserTargets(
    manager: EntityManager,
    endUsers: Array<{ organizationId: string; userId: string }>,
  ): Promise<void> {
    await manager.query(
      `UPDATE audit_events a SET target_id = $3
         FROM unnest($1::uuid[], $2::text[]) AS erased(organization_id, user_id)
        WHERE a.organization_id = erased.organization_id AND a.target_type = 'end_user'
          AND a.target_id = erased.user_id`,
      [endUsers.map((e) => e.organizationId), endUsers.map((e) => e.userId), ERASED_TARGET_ID],
    );
  }

  /**
   * Deletes up to `batchSize` events older than the retention, answering how many. Rows another
   * instance is deleting at the same moment are skipped (SKIP LOCKED), so any number of instances
   * may purge at once without waiting on each other or deleting a row twice; each batch is one
   * short statement, so a large backlog never holds a long transaction.
   */
  async deleteOlderThan(retentionDays: number, batchSize: number): Promise<number> {
    const rows: Array<{ count: number }> = await this.dataSource.query(
      `WITH doomed AS (
         SELECT id FROM audit_events
          WHERE created_at < now() - make_interval(days => $1)
          LIMIT $2
          FOR UPDATE SKIP LOCKED),
       deleted AS (DELETE FROM audit_events WHERE id IN (SELECT id FROM doomed) RETURNING 1)
       SELECT count(*)::int AS count FROM deleted`,
      [retentionDays, batchSize],
    );
    return rows[0]?.count ?? 0;
  }
}
