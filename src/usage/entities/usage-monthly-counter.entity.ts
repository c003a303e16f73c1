import { Column, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { Organization } from '../../organizations/entities/organization.entity';

/** The number of relationship_months rows ever inserted for an organization and month. */
@Entity('usage_monthly_counters')
export class UsageMonthlyCounter {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  organizationId: string;

  @PrimaryColumn({ type: 'date' })
  month: string;

  @Column({ name: 'active_relationships', type: 'bigint' })
  activeRelationships: string;

  @ManyToOne(() => Organization, { onDelete: 'CASCADE' })
  @JoinColumn({
    name: 'organization_id',
    foreignKeyConstraintName: 'usage_monthly_counters_organization_id_fkey',
  })
  organization?: Organization;
}
