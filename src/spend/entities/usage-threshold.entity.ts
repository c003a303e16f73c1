import { Check, Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/**
 * A share of the monthly token budget an organization's tokens reached in a month: one row per
 * (organization, month, threshold), so `usage.threshold_reached` is sent once however many
 * replies and instances cross it together (the row is inserted with the reply, ON CONFLICT DO
 * NOTHING, and only an inserted row writes the webhook event).
 */
@Entity('usage_thresholds_reached')
@Check('usage_thresholds_reached_threshold_check', `threshold IN (50, 80, 100)`)
@Check('usage_thresholds_reached_month_check', `extract(day FROM month) = 1`)
export class UsageThresholdReached {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'usage_thresholds_reached_organization_id_fkey',
  })
  organizationId: string;

  /** The first day of the UTC month. */
  @PrimaryColumn({ type: 'date' })
  month: string;

  /** 50, 80 or 100 (percent of the budget). */
  @PrimaryColumn({ type: 'smallint' })
  threshold: number;

  /** The month's tokens when it was reached. */
  @Column({ type: 'bigint' })
  used: string;

  /** The budget then. */
  @Column({ name: 'token_limit', type: 'bigint' })
  tokenLimit: string;

  @Column({ name: 'reached_at', type: 'timestamptz' })
  reachedAt: Date;
}
