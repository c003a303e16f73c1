import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/**
 * An end user's tokens (prompt + completion) of their latest UTC day with a reply: what
 * `end_user_daily_token_budget` is checked against. One row per end user, reset by the first
 * reply of a new day, so it never grows with time; erased with the end user.
 */
@Entity('end_user_token_days')
export class EndUserTokenDay {
  @PrimaryColumn({ name: 'end_user_id', type: 'uuid' })
  @ForeignKey('end_users', { onDelete: 'CASCADE', name: 'end_user_token_days_end_user_id_fkey' })
  endUserId: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'end_user_token_days_organization_id_fkey',
  })
  organizationId: string;

  @Column({ type: 'date' })
  day: string;

  @Column({ type: 'bigint', default: 0 })
  tokens: string;
}
