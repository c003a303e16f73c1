import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  PrimaryGeneratedColumn,
  Unique,
} from 'typeorm';

export const METER_EVENT_KINDS = ['relationship', 'tokens'] as const;
export type MeterEventKind = (typeof METER_EVENT_KINDS)[number];

export const METER_EVENT_STATUSES = ['pending', 'delivered', 'expired'] as const;
export type MeterEventStatus = (typeof METER_EVENT_STATUSES)[number];

/**
 * The outbox of Stripe meter events (contract §23): a row is written in the statement of the
 * change it meters (a relationship's first reply of a month; an hour's tokens once the hour is
 * over) and sent by MeterEventsWorker with retries until Stripe takes it. `identifier` is unique,
 * so the same usage is never queued twice; a delivered row is never sent again.
 */
@Entity('meter_events')
@Unique('meter_events_identifier_unique', ['identifier'])
@Check('meter_events_kind_check', `kind IN ('relationship', 'tokens')`)
@Check('meter_events_status_check', `status IN ('pending', 'delivered', 'expired')`)
@Check('meter_events_month_check', `extract(day FROM month) = 1`)
@Index('meter_events_due_idx', ['nextAttemptAt'], { where: `status = 'pending'` })
@Index('meter_events_pending_idx', ['organizationId', 'month'], { where: `status = 'pending'` })
export class MeterEvent {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', { onDelete: 'CASCADE', name: 'meter_events_organization_id_fkey' })
  organizationId: string;

  @Column({ type: 'text' })
  kind: MeterEventKind;

  /** The meter's event name (STRIPE_METER_EVENT_NAME or STRIPE_TOKEN_METER_EVENT_NAME). */
  @Column({ name: 'event_name', type: 'text' })
  eventName: string;

  /** SHA-256 hex: Stripe counts a retried identifier once. */
  @Column({ type: 'text' })
  identifier: string;

  /** The organization's Stripe customer when the event was queued. */
  @Column({ name: 'stripe_customer_id', type: 'text' })
  stripeCustomerId: string;

  /** The payload's `value` (1 for a relationship, the tokens of an hour). */
  @Column({ type: 'bigint' })
  value: string;

  /** The usage's time, the event's `timestamp` at Stripe. */
  @Column({ name: 'occurred_at', type: 'timestamptz' })
  occurredAt: Date;

  /** The first day of the UTC month of occurred_at (GET /v1/billing/usage counts by it). */
  @Column({ type: 'date' })
  month: string;

  @Column({ type: 'text', default: 'pending' })
  status: MeterEventStatus;

  @Column({ type: 'integer', default: 0 })
  attempts: number;

  @Column({ name: 'next_attempt_at', type: 'timestamptz' })
  nextAttemptAt: Date;

  /** A claim's lease: another instance may take the row once it has passed. */
  @Column({ name: 'locked_until', type: 'timestamptz', nullable: true })
  lockedUntil: Date | null;

  @Column({ name: 'lock_token', type: 'uuid', nullable: true })
  lockToken: string | null;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError: string | null;

  @Column({ name: 'delivered_at', type: 'timestamptz', nullable: true })
  deliveredAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
