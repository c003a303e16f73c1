import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
} from 'typeorm';
import type { Role } from './membership.entity';
import { Organization } from './organization.entity';

/**
 * An invitation to join an organization. The token is stored only as its SHA-256; the status is
 * derived: accepted (accepted_at), revoked (revoked_at), expired (expires_at), else pending.
 * At most one pending-or-expired open invitation per address and organization (the partial unique
 * index): inviting the same address again replaces it.
 */
@Entity('invitations')
@Check('invitations_role_check', `role IN ('owner', 'admin', 'member')`)
@Index('invitations_token_hash_unique', ['tokenHash'], { unique: true })
@Index('invitations_open_email_unique', ['organizationId', 'emailKey'], {
  unique: true,
  where: 'accepted_at IS NULL AND revoked_at IS NULL',
})
@Index('invitations_organization_idx', ['organizationId', 'createdAt', 'id'])
export class Invitation {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  organizationId: string;

  /** The address as the inviter wrote it (trimmed), to send the mail to. */
  @Column({ type: 'text' })
  email: string;

  /** lower(trim(email)): the comparison key, the same normalisation as login. */
  @Column({ name: 'email_key', type: 'text' })
  emailKey: string;

  @Column({ type: 'text' })
  role: Role;

  @Column({ name: 'token_hash', type: 'bytea' })
  tokenHash: Buffer;

  @Column({ name: 'invited_by_user_id', type: 'uuid', nullable: true })
  @ForeignKey('users', { onDelete: 'SET NULL', name: 'invitations_invited_by_user_id_fkey' })
  invitedByUserId: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  @Column({ name: 'accepted_at', type: 'timestamptz', nullable: true })
  acceptedAt: Date | null;

  @Column({ name: 'accepted_by_user_id', type: 'uuid', nullable: true })
  @ForeignKey('users', { onDelete: 'SET NULL', name: 'invitations_accepted_by_user_id_fkey' })
  acceptedByUserId: string | null;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt: Date | null;

  @ManyToOne(() => Organization, { onDelete: 'CASCADE' })
  @JoinColumn({
    name: 'organization_id',
    foreignKeyConstraintName: 'invitations_organization_id_fkey',
  })
  organization?: Organization;
}
