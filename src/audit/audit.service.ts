import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { AuthenticatedCaller } from '../common/auth/caller';
import { type Page, toPage } from '../common/pagination/pagination';
import type { AuditAction } from './audit-actions';
import { Clock } from '../common/time/clock';
import { auditOrigin } from './audit-event.step';
import { AuditRepository } from './audit.repository';
import { type AuditEventDto, toAuditEventResponse } from './dto/audit-event.dto';
import { ErasesEndUsers, ErasureOrder } from '../common/erasure/erasure-participant';

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
  constructor(
    private readonly events: AuditRepository,
    private readonly clock: Clock,
  ) {}

  record(manager: EntityManager, caller: AuthenticatedCaller, entry: AuditEntry): Promise<void> {
    return this.events.insert(manager, this.eventOf(caller, entry));
  }

  /**
   * As record, for an action that happens once per target (a subscription starts once): a
   * repeat that reaches the same target (an idempotent replay answered twice) is not logged
   * again. The repeats must serialize on the target's row first (AuditRepository).
   */
  recordOnce(
    manager: EntityManager,
    caller: AuthenticatedCaller,
    entry: AuditEntry,
  ): Promise<void> {
    return this.events.insertUnlessRecorded(manager, this.eventOf(caller, entry));
  }

  private eventOf(caller: AuthenticatedCaller, entry: AuditEntry) {
    return {
      ...auditOrigin(caller, { ...entry, targetType: entry.target.type, at: this.clock.now() }),
      targetId: entry.target.id,
      details: entry.details ?? {},
    };
  }

  /**
   * When an erasure completes: the log keeps who asked for it and when, but no longer names the
   * person (their user_id becomes ERASED_TARGET_ID), so the erasure leaves nothing behind.
   */
  @ErasesEndUsers({ order: ErasureOrder.REDACTIONS, tables: ['audit_events'] })
  redactErasedEndUsers(
    manager: EntityManager,
    endUsers: ReadonlyArray<{ organizationId: string; userId: string }>,
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
