import { Check, Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/** A relationship (end user, personality) active in a UTC month: the billing unit. */
@Entity('relationship_months')
@Check('relationship_months_month_check', `extract(day FROM month) = 1`)
@Index('relationship_months_end_user_idx', ['endUserId'])
@Index('relationship_months_items_idx', ['organizationId', 'month', 'personalityId', 'endUserId'])
export class RelationshipMonth {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'relationship_months_organization_id_fkey',
  })
  organizationId: string;

  /** The first day of the UTC month. */
  @PrimaryColumn({ type: 'date' })
  month: string;

  @PrimaryColumn({ name: 'end_user_id', type: 'uuid' })
  @ForeignKey('end_users', { onDelete: 'CASCADE', name: 'relationship_months_end_user_id_fkey' })
  endUserId: string;

  @PrimaryColumn({ name: 'personality_id', type: 'uuid' })
  personalityId: string;

  @Column({ name: 'first_active_at', type: 'timestamptz' })
  firstActiveAt: Date;
}
