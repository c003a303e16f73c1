import { Check, Column, Entity, ForeignKey, PrimaryColumn, UpdateDateColumn } from 'typeorm';

/**
 * An organization's spend limits, once it set one (contract §23); an organization without a row
 * has none. Each null is "no limit".
 */
@Entity('organization_limits')
@Check('organization_limits_monthly_check', `monthly_token_budget >= 1`)
@Check('organization_limits_daily_check', `end_user_daily_token_budget >= 1`)
@Check(
  'organization_limits_end_user_bucket_check',
  `(end_user_rps IS NULL) = (end_user_burst IS NULL) AND end_user_rps > 0 AND end_user_burst >= 1`,
)
export class OrganizationLimits {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'organization_limits_organization_id_fkey',
  })
  organizationId: string;

  /** Tokens (prompt + completion) the organization may spend in a UTC month. */
  @Column({ name: 'monthly_token_budget', type: 'bigint', nullable: true })
  monthlyTokenBudget: string | null;

  /** Tokens each end user may spend in a UTC day. */
  @Column({ name: 'end_user_daily_token_budget', type: 'bigint', nullable: true })
  endUserDailyTokenBudget: string | null;

  /** The refill rate of each end user's bucket on /v1/respond (with end_user_burst). */
  @Column({ name: 'end_user_rps', type: 'double precision', nullable: true })
  endUserRps: number | null;

  @Column({ name: 'end_user_burst', type: 'integer', nullable: true })
  endUserBurst: number | null;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
