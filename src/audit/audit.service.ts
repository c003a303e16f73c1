import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { CallerContext } from '../common/auth/caller';
import { type Page, toPage } from '../common/pagination/pagination';
import type { AuditAction } from './audit-actions';
import { AuditRepository } from './audit.repository';
import { type AuditEventDto, toAuditEventResponse } from './dto/audit-event.dto';

export interface AuditEntry {
  /** The organization whose log gets the event (for an accepted invitation: the one joined). */
  organizationId: string;
  action: AuditAction;
  target: { type: string; id: string };
  /** Safe facts only: never a key, token, password or other secret. */
  details?: Record<string, unknown>;
}

/**
 * The audit log. Any module records an action by calling `record` with the EntityManager of the
 * transaction that makes the change, so the event exists exactly when the change does.
 */
@Injectable()
export class AuditService {
  constructor(private readonly events: AuditRepository) {}

  record(manager: EntityManager, caller: CallerContext, entry: AuditEntry): Promise<void> {
    return this.events.insert(manager, {
      ...this.origin(caller, entry.organizationId, entry.action, entry.target.type),
      targetId: entry.target.id,
      details: entry.details ?? {},
    });
  }

  /**
   * For a hot path that makes its change in one statement: a CTE step to append to that
   * statement's WITH list, writing the event for each row of the CTE `source` (which returns
   * `audit_target_id` text and `audit_details` jsonb, never a secret). Its parameters start at
   * `$firstParam`. One statement is one transaction, and one round trip instead of four.
   */
  step(
    caller: CallerContext,
    entry: Omit<AuditEntry, 'target' | 'details'> & { targetType: string },
    source: string,
    firstParam: number,
  ): { sql: string; params: unknown[] } {
    return this.events.eventStep(
      source,
      firstParam,
      this.origin(caller, entry.organizationId, entry.action, entry.targetType),
    );
  }

  private origin(
    caller: CallerContext,
    organizationId: string,
    action: AuditAction,
    targetType: string,
  ) {
    return {
      organizationId,
      action,
      actorType: caller.kind === 'user' ? 'user' : 'api_key',
      actorId: caller.kind === 'user' ? caller.userId : caller.apiKeyId,
      targetType,
      ip: caller.ip ?? null,
      requestId: caller.requestId ?? null,
    };
  }

  /**
   * When an erasure completes: the log keeps who asked for it and when, but no longer names the
   * person (their user_id becomes ERASED_TARGET_ID), so the erasure leaves nothing behind.
   */
  redactErasedEndUsers(
    manager: EntityManager,
    endUsers: Array<{ organizationId: string; userId: string }>,
  ): Promise<void> {
    return this.events.redactEndUserTargets(manager, endUsers);
  }

  async list(
    organizationId: string,
    limit: number,
    startingAfter?: string,
    action?: string,
  ): Promise<Page<AuditEventDto>> {
    const rows = await this.events.findPageForOrganization(
      organizationId,
      limit,
      startingAfter,
      action,
    );
    return toPage(rows, limit, toAuditEventResponse);
  }
}
