import { auditEventStep, auditOrigin } from '../audit/audit-event.step';
import type { CallerContext } from '../common/auth/caller';
import { cte, type Source, sql, type WithEntry } from '../database/sql';
import type { MemoryRole } from '../memory/entities/memory.entity';
import type { StoredVerdict } from '../common/reply/reply-store';
import { webhookEventStep } from '../webhooks/webhook-event.step';

export interface FlaggedExchange {
  caller: CallerContext;
  userId: string;
  personalityId: string;
  /** Which of the exchange's two memories the event names. */
  role: MemoryRole;
  safety: StoredVerdict;
  at: Date;
}

/**
 * WITH entries that record a flagged exchange in the statement that stores it: the audit event
 * and the webhook event `conversation.flagged`, each naming the end user, the personality, the
 * memory, the categories and the action, never the text.
 */
export function flaggedExchangeSteps(
  memories: Source<'id' | 'role'>,
  exchange: FlaggedExchange,
): WithEntry[] {
  const organizationId = exchange.caller.organizationId;
  const facts = sql`'personality_id', ${exchange.personalityId}::uuid,
                    'memory_id', m.id::text,
                    'categories', ${JSON.stringify(exchange.safety.categories)}::jsonb,
                    'action', ${exchange.safety.action}::text`;
  const flagged = cte(
    'flagged',
    {
      audit_target_id: sql`${exchange.userId}::text`,
      audit_details: sql`jsonb_build_object(${facts})`,
      webhook_data: sql`jsonb_build_object('user_id', ${exchange.userId}::text, ${facts})`,
    },
    (lent) => sql`SELECT ${lent} FROM ${memories.ref} m WHERE m.role = ${exchange.role}`,
  );
  return [
    flagged,
    auditEventStep(
      auditOrigin(exchange.caller, {
        organizationId,
        action: 'conversation.flagged',
        targetType: 'end_user',
        at: exchange.at,
      }),
    )(flagged),
    webhookEventStep(flagged, { organizationId, type: 'conversation.flagged', at: exchange.at }),
  ];
}
