import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A relationship (end user, personality) active in a UTC month: the billing unit. */
@Entity('relationship_months')
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
}
