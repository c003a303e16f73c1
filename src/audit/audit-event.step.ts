import type { AuthenticatedCaller } from '../common/auth/caller';
import { Cte, cte, type Source, sql } from '../database/sql';
import type { AuditAction } from './audit-actions';

/** What every event of a change says besides its target: who did it, from where, how. */
export interface AuditOrigin {
  organizationId: string;
  action: AuditAction;
  actorType: 'user' | 'api_key';
  actorId: string;
  targetType: string;
  ip: string | null;
  requestId: string | null;
  /** The Clock's time of the change: the event's created_at. */
  at: Date;
}

export function auditOrigin(
  caller: AuthenticatedCaller,
  entry: { organizationId: string; action: AuditAction; targetType: string; at: Date },
): AuditOrigin {
  return {
    organizationId: entry.organizationId,
    action: entry.action,
    actorType: caller.kind,
    actorId: caller.kind === 'user' ? caller.userId : caller.apiKeyId,
    targetType: entry.targetType,
    ip: caller.ip ?? null,
    requestId: caller.requestId ?? null,
    at: entry.at,
  };
}

/** The rows an audit step reads: one event per row, never a secret in the details. */
export type AuditedRows = Source<'audit_target_id' | 'audit_details'>;

/** An audit step for a statement, once its audited rows are known. */
export type AuditStep = (source: AuditedRows) => Cte;

/**
 * A CTE writing one audit event per row of `source` (`audit_target_id` text, `audit_details`
 * jsonb). Put in the statement that makes the change, it commits or rolls back with it: the
 * same transaction in one round trip.
 */
export function auditEventStep(origin: AuditOrigin): AuditStep {
  return (source) =>
    new Cte(
      `${source.name}_audit`,
      sql`INSERT INTO audit_events
            (organization_id, action, actor_type, actor_id, target_type, target_id, ip, request_id, details,
             created_at)
          SELECT ${origin.organizationId}::uuid, ${origin.action}, ${origin.actorType},
                 ${origin.actorId}, ${origin.targetType}, s.audit_target_id, ${origin.ip},
                 ${origin.requestId}, s.audit_details, ${origin.at}::timestamptz
            FROM ${source.ref} s`,
    );
}

/** The audit of a change to an organization's own settings, as entries of its statement. */
export type OrganizationPatchAudit = (written: Source<'organization_id'>) => Cte[];

/**
 * The audit of a PATCH of an organization's own settings (safety, limits): one event whose
 * target is the organization and whose details are the fields the PATCH named, as given, read
 * from the row the statement wrote. A PATCH that names nothing changes nothing: no entries.
 */
export function organizationPatchAudit(
  caller: AuthenticatedCaller,
  entry: { organizationId: string; action: AuditAction; at: Date },
  patch: object,
): OrganizationPatchAudit {
  const changed = { ...patch };
  if (Object.keys(changed).length === 0) return () => [];
  const step = auditEventStep(auditOrigin(caller, { ...entry, targetType: 'organization' }));
  return (written) => {
    const audited = cte(
      `${written.name}_audited`,
      {
        audit_target_id: sql`organization_id::text`,
        audit_details: sql`${JSON.stringify(changed)}::jsonb`,
      },
      (lent) => sql`SELECT ${lent} FROM ${written.ref}`,
    );
    return [audited, step(audited)];
  };
}
