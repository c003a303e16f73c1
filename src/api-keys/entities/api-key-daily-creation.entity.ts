import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/**
 * The keys an organization made (created or rolled) in a UTC day (API_KEYS_PER_DAY): removing
 * or demoting a member, and a password reset that takes an address back, revoke every key down
 * the member's lines in one statement, so how many keys there are bounds how long that takes.
 * Only the current day's row and the day before's are kept.
 */
@Entity('api_key_daily_creations')
export class ApiKeyDailyCreation {
  @PrimaryColumn({
    name: 'organization_id',
    type: 'uuid',
    primaryKeyConstraintName: 'api_key_daily_creations_pkey',
  })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'api_key_daily_creations_organization_id_fkey',
  })
  organizationId: string;

  /** The UTC day. */
  @PrimaryColumn({ type: 'date', primaryKeyConstraintName: 'api_key_daily_creations_pkey' })
  day: string;

  @Column({ type: 'integer' })
  keys: number;
}
