import {
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  PrimaryColumn,
  Unique,
  UpdateDateColumn,
} from 'typeorm';

/** The organization's Stripe customer, created on first need. */
@Entity('billing_customers')
@Unique('billing_customers_stripe_customer_unique', ['stripeCustomerId'])
export class BillingCustomer {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'billing_customers_organization_id_fkey',
  })
  organizationId: string;

  @Column({ name: 'stripe_customer_id', type: 'text' })
  stripeCustomerId: string;

  /** Set by `setup_intent.succeeded`; new subscriptions charge it. */
  @Column({ name: 'default_payment_method_id', type: 'text', nullable: true })
  defaultPaymentMethodId: string | null;

  /** Time of the event that set it, so an older event cannot replace a newer method. */
  @Column({ name: 'default_payment_method_at', type: 'timestamptz', nullable: true })
  defaultPaymentMethodAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
