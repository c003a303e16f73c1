import { Column, Entity, ForeignKey, Index, PrimaryGeneratedColumn } from 'typeorm';

/**
 * The outbox: one row per event, written in the transaction of the change it reports, and only
 * when an enabled endpoint of the organization subscribes to its type. Its id, as `evt_` + 32 hex
 * digits, is the `webhook-id` of every attempt.
 */
@Entity('webhook_events')
@Index('webhook_events_created_at_idx', ['createdAt'])
export class WebhookEvent {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', { onDelete: 'CASCADE', name: 'webhook_events_organization_id_fkey' })
  organizationId: string;

  @Column({ type: 'text' })
  type: string;

  /** Facts about the change; never a secret. */
  @Column({ type: 'jsonb' })
  data: Record<string, unknown>;

  /** The Clock's time of the change, written by the service (no default). */
  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
