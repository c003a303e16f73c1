import {
  Check,
  Column,
  Entity,
  ForeignKey,
  Index,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
} from 'typeorm';
import { WebhookEndpoint } from './webhook-endpoint.entity';
import { WebhookEvent } from './webhook-event.entity';

export type WebhookAttemptStatus = 'pending' | 'succeeded' | 'failed';

/**
 * One attempt to deliver one event to one endpoint; the pending ones are the work queue. An
 * instance claims a due attempt by setting `locked_until` (a lease) and `lock_token`; the lease
 * running out (the instance died) makes it due again, and only the holder of the token can record
 * its outcome.
 */
@Entity('webhook_delivery_attempts')
@Check('webhook_delivery_attempts_status_check', `status IN ('pending', 'succeeded', 'failed')`)
@Index(
  'webhook_delivery_attempts_event_endpoint_attempt_unique',
  ['eventId', 'endpointId', 'attempt'],
  { unique: true },
)
@Index('webhook_delivery_attempts_endpoint_idx', ['endpointId', 'createdAt', 'id'])
/** The queue, by endpoint: the claim visits endpoints with pending attempts, oldest due first. */
@Index('webhook_delivery_attempts_pending_idx', ['endpointId', 'nextAttemptAt'], {
  where: `status = 'pending'`,
})
export class WebhookDeliveryAttempt {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'webhook_delivery_attempts_organization_id_fkey',
  })
  organizationId: string;

  @Column({ name: 'endpoint_id', type: 'uuid' })
  endpointId: string;

  @Column({ name: 'event_id', type: 'uuid' })
  eventId: string;

  @Column({ name: 'event_type', type: 'text' })
  eventType: string;

  /** 1 for the first attempt. */
  @Column({ type: 'integer' })
  attempt: number;

  @Column({ type: 'text', default: 'pending' })
  status: WebhookAttemptStatus;

  @Column({ name: 'response_status', type: 'integer', nullable: true })
  responseStatus: number | null;

  @Column({ type: 'text', nullable: true })
  error: string | null;

  @Column({ name: 'duration_ms', type: 'integer', nullable: true })
  durationMs: number | null;

  /** The Clock's time the attempt was scheduled, written by the service (no default). */
  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  /** Pending: when it falls due. Failed: when the next attempt falls due (null: none). */
  @Column({ name: 'next_attempt_at', type: 'timestamptz', nullable: true })
  nextAttemptAt: Date | null;

  @Column({ name: 'locked_until', type: 'timestamptz', nullable: true })
  lockedUntil: Date | null;

  @Column({ name: 'lock_token', type: 'uuid', nullable: true })
  lockToken: string | null;

  @ManyToOne(() => WebhookEndpoint, { onDelete: 'CASCADE' })
  @JoinColumn({
    name: 'endpoint_id',
    foreignKeyConstraintName: 'webhook_delivery_attempts_endpoint_id_fkey',
  })
  endpoint?: WebhookEndpoint;

  @ManyToOne(() => WebhookEvent, { onDelete: 'CASCADE' })
  @JoinColumn({
    name: 'event_id',
    foreignKeyConstraintName: 'webhook_delivery_attempts_event_id_fkey',
  })
  event?: WebhookEvent;
}
