import {
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  PrimaryGeneratedColumn,
  Unique,
  UpdateDateColumn,
} from 'typeorm';

/** Our status: Stripe's, except `suspended` while collection is paused. */
export const SUBSCRIPTION_STATUSES = [
  'active',
  'suspended',
  'trialing',
  'past_due',
  'unpaid',
  'incomplete',
  'incomplete_expired',
  'paused',
  'canceled',
] as const;

export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

/**
 * The statuses of a subscription that has ended; every other status counts as live (one live
 * subscription per organization, held by a partial unique index).
 */
export const ENDED_STATUSES: readonly SubscriptionStatus[] = ['canceled', 'incomplete_expired'];

/** ENDED_STATUSES as an SQL list, for `status IN (…)` (constants only, never input). */
export const ENDED_STATUSES_SQL = ENDED_STATUSES.map((status) => `'${status}'`).join(', ');

export function isEnded(status: string): boolean {
  return (ENDED_STATUSES as readonly string[]).includes(status);
}

/** The local mirror of the organization's Stripe subscription, kept in step by webhooks. */
@Entity('billing_subscriptions')
@Unique('billing_subscriptions_stripe_unique', ['stripeSubscriptionId'])
@Index('billing_subscriptions_org_idx', ['organizationId', 'createdAt'])
@Index('billing_subscriptions_one_live_per_org', ['organizationId'], {
  unique: true,
  where: `status NOT IN (${ENDED_STATUSES_SQL})`,
})
export class BillingSubscription {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'billing_subscriptions_organization_id_fkey',
  })
  organizationId: string;

  @Column({ name: 'stripe_subscription_id', type: 'text' })
  stripeSubscriptionId: string;

  @Column({ name: 'price_id', type: 'text', nullable: true })
  priceId: string | null;

  @Column({ type: 'text' })
  status: SubscriptionStatus;

  @Column({ name: 'stripe_status', type: 'text' })
  stripeStatus: string;

  @Column({ name: 'collection_paused', type: 'boolean', default: false })
  collectionPaused: boolean;

  @Column({ name: 'cancel_at_period_end', type: 'boolean', default: false })
  cancelAtPeriodEnd: boolean;

  @Column({ name: 'current_period_end', type: 'timestamptz', nullable: true })
  currentPeriodEnd: Date | null;

  /** Stripe's clock at the snapshot we hold: older snapshots never replace it. */
  @Column({ name: 'provider_updated_at', type: 'timestamptz' })
  providerUpdatedAt: Date;

  /** Bumped by every applied change; part of the idempotency keys of suspend and resume. */
  @Column({ type: 'int', default: 0 })
  revision: number;

  @Column({ name: 'latest_invoice_id', type: 'text', nullable: true })
  latestInvoiceId: string | null;

  @Column({ name: 'latest_invoice_status', type: 'text', nullable: true })
  latestInvoiceStatus: 'paid' | 'payment_failed' | null;

  @Column({ name: 'latest_invoice_at', type: 'timestamptz', nullable: true })
  latestInvoiceAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
