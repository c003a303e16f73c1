/**
 * The event types an endpoint may list (contract §17). `ping` among them, as the contract lists
 * it, though `POST /v1/webhook-endpoints/{id}/test` sends it whatever the list says.
 */
export const WEBHOOK_EVENT_TYPES = [
  'end_user.created',
  'end_user.deleted',
  'personality.created',
  'personality.deleted',
  'api_key.created',
  'api_key.revoked',
  'member.added',
  'member.removed',
  'subscription.updated',
  'usage.threshold_reached',
  'conversation.flagged',
  'ping',
] as const;

/** What the service emits to subscribers: every type an endpoint may list but `ping`. */
export type SubscribableEventType = Exclude<(typeof WEBHOOK_EVENT_TYPES)[number], 'ping'>;

/** The public id of an event (the `webhook-id` header and the body's `id`). */
export function publicEventId(uuid: string): string {
  return `evt_${uuid.replace(/-/g, '')}`;
}
