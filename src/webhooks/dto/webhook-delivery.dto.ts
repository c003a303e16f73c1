import { ApiProperty } from '@nestjs/swagger';
import { publicEventId, WEBHOOK_EVENT_TYPES } from '../webhook-event-types';
import type { DeliveryAttemptRow } from '../webhooks.repository';

export class WebhookDeliveryDto {
  @ApiProperty({ format: 'uuid', description: 'The id of this attempt' })
  id: string;

  @ApiProperty({
    example: 'evt_2f1c0d7e9a8b4c3d8e7f6a5b4c3d2e1f',
    description: 'Also the webhook-id header',
  })
  event_id: string;

  @ApiProperty({ enum: WEBHOOK_EVENT_TYPES })
  event_type: string;

  @ApiProperty({
    minimum: 1,
    description: '1 for the first attempt of this event to this endpoint',
  })
  attempt: number;

  @ApiProperty({
    enum: ['pending', 'succeeded', 'failed'],
    description:
      'pending: not made yet (or in flight); succeeded: a 2xx in time; failed: anything else',
  })
  status: string;

  @ApiProperty({
    nullable: true,
    type: Number,
    description: 'The HTTP status the endpoint answered',
  })
  response_status: number | null;

  @ApiProperty({
    nullable: true,
    type: String,
    description: 'Why the attempt failed (timeout, refused address, connection error, status)',
  })
  error: string | null;

  @ApiProperty({ nullable: true, type: Number })
  duration_ms: number | null;

  @ApiProperty({ example: '2026-11-22T01:23:45.678Z' })
  created_at: string;

  @ApiProperty({
    nullable: true,
    type: String,
    description: 'Pending: when it is due. Failed: when the next attempt is due (null: none left).',
  })
  next_attempt_at: string | null;
}

export function toWebhookDeliveryResponse(row: DeliveryAttemptRow): WebhookDeliveryDto {
  return {
    id: row.id,
    event_id: publicEventId(row.event_id),
    event_type: row.event_type,
    attempt: row.attempt,
    status: row.status,
    response_status: row.response_status,
    error: row.error,
    duration_ms: row.duration_ms,
    created_at: row.created_at.toISOString(),
    next_attempt_at: row.next_attempt_at?.toISOString() ?? null,
  };
}
