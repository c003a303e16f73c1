import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/**
 * The invitations a user sent on one UTC day, across all their organizations: the per-user
 * side of INVITATIONS_PER_DAY (contract §29; an organization's own count is on its row). One row
 * per user, its count starting over on a new day; concurrent invitations serialise on it.
 */
@Entity('inviter_days')
export class InviterDay {
  @PrimaryColumn({ name: 'user_id', type: 'uuid', primaryKeyConstraintName: 'inviter_days_pkey' })
  @ForeignKey('users', { onDelete: 'CASCADE', name: 'inviter_days_user_id_fkey' })
  userId: string;

  /** The UTC day `sent` counts. */
  @Column({ type: 'date' })
  day: string;

  /** Invitations sent on `day`, each new link counted. */
  @Column({ type: 'integer' })
  sent: number;
}
