import { type Source, sql } from '../database/sql';
import type { NewRelationshipColumns } from '../usage/usage.steps';

/** The UTC hour of `at` (its first instant): meter_token_hours' key. */
export const hourOf = (at: Date) => new Date(Math.floor(at.getTime() / 3_600_000) * 3_600_000);

/**
 * A CTE queueing one meter event (value 1) for each relationship of `relationships`, the pairs
 * the reply's own statement counted for the first time in their month. Its identifier is the
 * SHA-256 hex of `<organization id>:<YYYY-MM>:<end user id>:<personality id>` (contract §23), unique
 * in the outbox, so the same relationship is never queued twice; an organization without a Stripe
 * customer queues nothing (docs/billing.md: its relationships are not metered).
 */
export function relationshipMeterEventStep(
  relationships: Source<NewRelationshipColumns>,
  event: { eventName: string; at: Date },
) {
  return sql`${relationships.ref}_meter_event AS (
      INSERT INTO meter_events (organization_id, kind, event_name, identifier, stripe_customer_id,
                                value, occurred_at, month, next_attempt_at)
      SELECT r.organization_id, 'relationship', ${event.eventName},
             encode(sha256(convert_to(r.organization_id::text || ':' || to_char(r.month, 'YYYY-MM')
                                      || ':' || r.end_user_id::text || ':' || r.personality_id::text,
                                      'UTF8')), 'hex'),
             c.stripe_customer_id, 1, ${event.at}::timestamptz, r.month, ${event.at}::timestamptz
        FROM ${relationships.ref} r
        JOIN billing_customers c ON c.organization_id = r.organization_id
      ON CONFLICT (identifier) DO NOTHING)`;
}

/**
 * A CTE adding a reply's tokens to its organization's UTC hour, which the meter worker sends as
 * one event once the hour is over (STRIPE_TOKEN_METER_EVENT_NAME). An hour already sealed (its
 * event queued: this instance's clock is behind the worker's by more than the grace) keeps them
 * as late tokens, which the worker sends as an event of their own.
 */
export function tokenHourStep(tokens: { organizationId: string; at: Date; tokens: number }) {
  return sql`meter_token_hour AS (
      INSERT INTO meter_token_hours AS h (organization_id, hour, tokens)
      VALUES (${tokens.organizationId}, ${hourOf(tokens.at)}, ${tokens.tokens}::bigint)
      ON CONFLICT (organization_id, hour) DO UPDATE
        SET tokens = h.tokens + CASE WHEN h.sealed THEN 0 ELSE EXCLUDED.tokens END,
            late_tokens = h.late_tokens + CASE WHEN h.sealed THEN EXCLUDED.tokens ELSE 0 END)`;
}
