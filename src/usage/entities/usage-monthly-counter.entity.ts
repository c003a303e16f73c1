import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/** The number of relationship_months rows ever inserted for an organization and month. */
@Entity('usage_monthly_counters')
export class UsageMonthlyCounter {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'usage_monthly_counters_organization_id_fkey',
  })
  organizationId: string;

  @PrimaryColumn({ type: 'date' })
  month: string;

  @Column({ name: 'active_relationships', type: 'bigint' })
  activeRelationships: string;
}
