import type { Type } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';
import type { SubscribableEventType } from '../webhook-event-types';

/**
 * What a webhook request's body holds, one schema per event type (docs/webhooks.md): the
 * envelope `{id, type, created_at, organization_id, data}`, and `data` as each change writes it
 * (ids, names and states, never a secret). Times inside `data` are ISO 8601 as PostgreSQL writes
 * them (`2026-11-22T01:23:45.678901+00:00`). Documentation only: the service builds the bodies
 * in SQL and in WebhookEventsService.emit.
 */
abstract class WebhookEventEnvelopeDto {
  @ApiProperty({
    example: 'evt_2f1c0d7e9a8b4c3d8e7f6a5b4c3d2e1f',
    description: 'Also the webhook-id header; the same on every attempt: drop duplicates by it',
  })
  id: string;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z', description: 'When the change happened' })
  created_at: string;

  @ApiProperty({ format: 'uuid' })
  organization_id: string;
}

export class EndUserCreatedDataDto {
  @ApiProperty({ example: 'customer-42' })
  user_id: string;

  @ApiProperty()
  created_at: string;
}

export class EndUserDeletedDataDto {
  @ApiProperty({ example: 'customer-42' })
  user_id: string;

  @ApiProperty({ description: 'When the erasure completed' })
  deleted_at: string;
}

export class PersonalityCreatedDataDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ example: 'Sage' })
  name: string;

  @ApiProperty({ example: 'sage-mentor', description: 'The catalog entry it was copied from' })
  source_slug: string;

  @ApiProperty()
  created_at: string;
}

export class PersonalityDeletedDataDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ example: 'Sage' })
  name: string;

  @ApiProperty({ example: 'sage-mentor' })
  source_slug: string;
}

const SCOPES = ['read', 'read_write', 'admin'];

export class ApiKeyCreatedDataDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ example: 'production backend' })
  name: string;

  @ApiProperty({ enum: SCOPES, isArray: true })
  scopes: string[];

  @ApiProperty({ nullable: true, type: String })
  expires_at: string | null;
}

export class ApiKeyRevokedDataDto {
  @ApiProperty({ format: 'uuid' })
  id: string;

  @ApiProperty({ example: 'production backend' })
  name: string;

  @ApiProperty()
  revoked_at: string;
}

const ROLES = ['owner', 'admin', 'member'];

export class MemberAddedDataDto {
  @ApiProperty({ format: 'uuid' })
  user_id: string;

  @ApiProperty({ enum: ROLES })
  role: string;

  @ApiProperty({ format: 'uuid', description: 'The invitation the member accepted' })
  invitation_id: string;
}

export class MemberRemovedDataDto {
  @ApiProperty({ format: 'uuid' })
  user_id: string;

  @ApiProperty({ enum: ROLES, description: 'The role the member had' })
  role: string;

  @ApiProperty({ description: 'true: the member left; false: they were removed' })
  left: boolean;
}

export class SubscriptionUpdatedDataDto {
  @ApiProperty({ example: 'sub_1Pq2Rs3Tu4Vw5Xy6', description: "Stripe's subscription id" })
  id: string;

  @ApiProperty({ example: 'active', description: "Stripe's subscription status" })
  status: string;

  @ApiProperty({ nullable: true, type: String, example: 'price_1Pq2Rs3Tu4Vw5Xy6' })
  price_id: string | null;

  @ApiProperty({ nullable: true, type: String })
  current_period_end: string | null;

  @ApiProperty()
  cancel_at_period_end: boolean;
}

export class ConversationFlaggedDataDto {
  @ApiProperty({ example: 'customer-42' })
  user_id: string;

  @ApiProperty({ format: 'uuid' })
  personality_id: string;

  @ApiProperty({
    example: '1042',
    description: "The memory that was flagged: the user's message, else the reply",
  })
  memory_id: string;

  @ApiProperty({ enum: ['self_harm', 'sexual_minors', 'violence'], isArray: true })
  categories: string[];

  @ApiProperty({ enum: ['crisis_response', 'blocked', 'flagged'] })
  action: string;
}

export class UsageThresholdReachedDataDto {
  @ApiProperty({ example: '2026-11', description: 'The UTC month' })
  month: string;

  @ApiProperty({ enum: [50, 80, 100], description: 'The share of the monthly budget reached, %' })
  threshold: number;

  @ApiProperty({ example: 4_000_123, description: 'The month’s tokens when it was reached' })
  used: number;

  @ApiProperty({ example: 5_000_000, description: 'The monthly_token_budget then' })
  limit: number;
}

export class PingDataDto {
  @ApiProperty({ format: 'uuid', description: 'The endpoint the test was asked for' })
  webhook_endpoint_id: string;
}

/** One event class per type: `type` is the literal, `data` the type's own schema. */
function eventOf(type: string, data: Type<unknown>, description: string): Type<unknown> {
  class Event extends WebhookEventEnvelopeDto {
    @ApiProperty({ enum: [type], description })
    type: string;

    @ApiProperty({ type: data })
    data: unknown;
  }
  const name = `${type
    .split(/[._]/)
    .map((word) => word[0].toUpperCase() + word.slice(1))
    .join('')}EventDto`;
  Object.defineProperty(Event, 'name', { value: name });
  return Event;
}

/** Every event a webhook endpoint may receive, by type (the union `WebhookEventDto`). */
export const WEBHOOK_EVENTS = {
  'end_user.created': eventOf('end_user.created', EndUserCreatedDataDto, 'An end user was created'),
  'end_user.deleted': eventOf(
    'end_user.deleted',
    EndUserDeletedDataDto,
    "An end user's erasure has completed",
  ),
  'personality.created': eventOf(
    'personality.created',
    PersonalityCreatedDataDto,
    'A personality was copied from the catalog',
  ),
  'personality.deleted': eventOf(
    'personality.deleted',
    PersonalityDeletedDataDto,
    'A personality was deleted',
  ),
  'api_key.created': eventOf('api_key.created', ApiKeyCreatedDataDto, 'An API key was created'),
  'api_key.revoked': eventOf('api_key.revoked', ApiKeyRevokedDataDto, 'An API key was revoked'),
  'member.added': eventOf('member.added', MemberAddedDataDto, 'A user joined the organization'),
  'member.removed': eventOf('member.removed', MemberRemovedDataDto, 'A member left or was removed'),
  'subscription.updated': eventOf(
    'subscription.updated',
    SubscriptionUpdatedDataDto,
    "The organization's subscription changed",
  ),
  'conversation.flagged': eventOf(
    'conversation.flagged',
    ConversationFlaggedDataDto,
    'A message or a reply was flagged by the safety checks (never with its text)',
  ),
  'usage.threshold_reached': eventOf(
    'usage.threshold_reached',
    UsageThresholdReachedDataDto,
    "The organization's tokens this month reached 50, 80 or 100 % of its monthly_token_budget (once per threshold and month)",
  ),
  ping: eventOf('ping', PingDataDto, 'Sent by POST /v1/webhook-endpoints/{id}/test'),
} satisfies Record<SubscribableEventType | 'ping', Type<unknown>>;
