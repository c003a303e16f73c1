import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  PrimaryGeneratedColumn,
  Unique,
  UpdateDateColumn,
} from 'typeorm';

export type EndUserStatus = 'active' | 'deleting';

/**
 * A customer's end user, keyed by (organization, user_id). The hot paths read and write it with
 * raw SQL (see EndUsersService); the entity documents the table for TypeORM.
 */
@Entity('end_users')
@Unique('end_users_organization_user_id_unique', ['organizationId', 'userId'])
@Check('end_users_status_check', `status IN ('active', 'deleting')`)
@Check('end_users_erasure_scheduled', `(status = 'deleting') = (erase_after IS NOT NULL)`)
@Index('end_users_erasure_due_idx', ['eraseAfter'], { where: `status = 'deleting'` })
// The erasure's claim, organization by organization (IndexDueErasuresByOrganization).
@Index('end_users_erasure_due_by_organization_idx', ['organizationId', 'eraseAfter', 'id'], {
  where: `status = 'deleting'`,
})
export class EndUser {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'end_users_organization_id_fkey',
  })
  organizationId: string;

  @Column({ name: 'user_id', type: 'text' })
  userId: string;

  @Column({ type: 'jsonb', default: () => "'{}'" })
  metadata: Record<string, unknown>;

  @Column({ type: 'text', default: 'active' })
  status: EndUserStatus;

  /** Set while status is `deleting`: the erasure worker removes everything after this time. */
  @Column({ name: 'erase_after', type: 'timestamptz', nullable: true })
  eraseAfter: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
