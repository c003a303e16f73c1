import {
  Column,
  CreateDateColumn,
  Entity,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';

export type EndUserStatus = 'active' | 'deleting';

/**
 * A customer's end user, keyed by (organization, user_id). The hot paths read and write it with
 * raw SQL (see EndUsersService); the entity documents the table for TypeORM.
 */
@Entity('end_users')
export class EndUser {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  organizationId: string;

  @Column({ name: 'user_id', type: 'text' })
  userId: string;

  @Column({ type: 'jsonb' })
  metadata: Record<string, unknown>;

  @Column({ type: 'text' })
  status: EndUserStatus;

  /** Set while status is `deleting`: the erasure worker removes everything after this time. */
  @Column({ name: 'erase_after', type: 'timestamptz', nullable: true })
  eraseAfter: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
