import { Check, Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { EndUser } from '../../end-users/entities/end-user.entity';
import { Organization } from '../../organizations/entities/organization.entity';

/** A relationship (end user, personality) active in a UTC month: the billing unit. */
@Entity('relationship_months')
@Check('relationship_months_month_check', `extract(day FROM month) = 1`)
@Index('relationship_months_end_user_idx', ['endUserId'])
@Index('relationship_months_items_idx', ['organizationId', 'month', 'personalityId', 'endUserId'])
export class RelationshipMonth {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  organizationId: string;

  /** The first day of the UTC month. */
  @PrimaryColumn({ type: 'date' })
  month: string;

  @PrimaryColumn({ name: 'end_user_id', type: 'uuid' })
  endUserId: string;

  @PrimaryColumn({ name: 'personality_id', type: 'uuid' })
  personalityId: string;

  @Column({ name: 'first_active_at', type: 'timestamptz' })
  firstActiveAt: Date;

  @ManyToOne(() => Organization, { onDelete: 'CASCADE' })
  @JoinColumn({
    name: 'organization_id',
    foreignKeyConstraintName: 'relationship_months_organization_id_fkey',
  })
  organization?: Organization;

  @ManyToOne(() => EndUser, { onDelete: 'CASCADE' })
  @JoinColumn({
    name: 'end_user_id',
    foreignKeyConstraintName: 'relationship_months_end_user_id_fkey',
  })
  endUser?: EndUser;
}
