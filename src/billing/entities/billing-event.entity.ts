import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

/** A Stripe event already processed; its id is stored in the transaction of its change. */
@Entity('billing_events')
export class BillingEvent {
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ type: 'text' })
  type: string;

  @Column({ name: 'event_created_at', type: 'timestamptz' })
  eventCreatedAt: Date;

  /** `applied`, `stale` (older than the state held) or `ignored` (nothing of ours). */
  @Column({ type: 'text' })
  outcome: string;

  @CreateDateColumn({ name: 'processed_at', type: 'timestamptz' })
  processedAt: Date;
}
