/**
 * Every action the audit log records (docs/teams.md). A module that adds one lists it here, so
 * the `?action=` filter and the OpenAPI document know it.
 */
export const AUDIT_ACTIONS = [
  'api_key.created',
  'api_key.revoked',
  'api_key.rolled',
  'api_key.updated',
  'member.invited',
  'member.joined',
  'member.role_changed',
  'member.removed',
  'invitation.revoked',
  'organization.created',
  'organization.updated',
  'subscription.started',
  'subscription.suspended',
  'subscription.resumed',
  'end_user.deleted',
  'personality.deleted',
  'webhook_endpoint.created',
  'webhook_endpoint.updated',
  'webhook_endpoint.deleted',
  'webhook_delivery.redelivered',
  'conversation.flagged',
  'safety_settings.updated',
  'limits.updated',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];
