import { raw, type Source, sql } from '../database/sql';
import type { SubscribableEventType } from './webhook-event-types';

/** The rows a webhook step reads: one event per row, its `data` never holding a secret. */
export type WebhookEventRows = Source<'webhook_data'>;

/** The event a step writes, and `at`: the Clock's time of the change, when its first attempt is due. */
export interface WebhookEventOf {
  organizationId: string;
  type: SubscribableEventType;
  at: Date;
}

/**
 * WITH entries writing one event of `type` per row of `source` (`webhook_data` jsonb: ids,
 * names and states only; nothing checks SQL-built data at run time), with a first attempt, due
 * at `at`, for each enabled endpoint of the organization that subscribes to it. No subscriber:
 * nothing is written. In the statement that makes the change, the event commits with it.
 */
export function webhookEventStep(source: WebhookEventRows, event: WebhookEventOf) {
  const name = source.name;
  const subscribed = `${name}_webhook_subscribed`;
  const inserted = `${name}_webhook_event`;
  // The subscribed endpoints are read with FOR KEY SHARE, the lock the attempts' foreign key
  // takes anyway, but first: an endpoint deleted meanwhile is skipped instead of failing the
  // caller's change on the foreign key.
  return sql`${raw(subscribed)} AS (
      SELECT id FROM webhook_endpoints
       WHERE organization_id = ${event.organizationId}::uuid AND status = 'enabled'
         AND ${event.type}::text = ANY (events)
       FOR KEY SHARE),
    ${raw(inserted)} AS (
      INSERT INTO webhook_events (organization_id, type, data, created_at)
      SELECT ${event.organizationId}::uuid, ${event.type}, s.webhook_data, ${event.at}::timestamptz
        FROM ${source.ref} s
       WHERE EXISTS (SELECT 1 FROM ${raw(subscribed)})
      RETURNING id, organization_id, type),
    ${raw(`${name}_webhook_attempt`)} AS (
      INSERT INTO webhook_delivery_attempts
        (organization_id, endpoint_id, event_id, event_type, attempt, next_attempt_at, created_at)
      SELECT ev.organization_id, e.id, ev.id, ev.type, 1, ${event.at}::timestamptz,
             ${event.at}::timestamptz
        FROM ${raw(inserted)} ev CROSS JOIN ${raw(subscribed)} e)`;
}
