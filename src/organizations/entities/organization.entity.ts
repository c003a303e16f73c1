import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';

@Entity('organizations')
// The organizations a user made: what a deletion of the user sets to null.
@Index('organizations_created_by_user_idx', ['createdByUserId'], {
  where: 'created_by_user_id IS NOT NULL',
})
@Check('organizations_rate_limit_rps_positive', 'rate_limit_rps > 0')
@Check('organizations_rate_limit_burst_positive', 'rate_limit_burst >= 1')
@Check('organizations_memory_retention_days_range', 'memory_retention_days BETWEEN 1 AND 3650')
export class Organization {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ type: 'text' })
  name: string;

  /** The organization's own refill rate (a plan may raise it); null: RATE_LIMIT_ORG_RPS. */
  @Column({ name: 'rate_limit_rps', type: 'double precision', nullable: true })
  rateLimitRps: number | null;

  /** The organization's own bucket capacity; null: RATE_LIMIT_ORG_BURST. */
  @Column({ name: 'rate_limit_burst', type: 'integer', nullable: true })
  rateLimitBurst: number | null;

  /** Memories older than this many days are purged (docs/memory.md); null: kept forever. */
  @Column({ name: 'memory_retention_days', type: 'integer', nullable: true })
  memoryRetentionDays: number | null;

  /** The UTC day `invitations_sent` counts (INVITATIONS_PER_DAY); null before the first. */
  @Column({ name: 'invitations_day', type: 'date', nullable: true })
  invitationsDay: string | null;

  /** Invitations sent on `invitations_day`, each new link counted. */
  @Column({ name: 'invitations_sent', type: 'integer', default: 0 })
  invitationsSent: number;

  /**
   * The user who made the organization, never changed: its account, which the instance's shared
   * work is divided by (OrganizationsService.accountOf). Null when that user is gone.
   */
  @Column({ name: 'created_by_user_id', type: 'uuid', nullable: true })
  @ForeignKey('users', { onDelete: 'SET NULL', name: 'organizations_created_by_user_id_fkey' })
  createdByUserId: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
