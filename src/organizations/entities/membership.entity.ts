import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  JoinColumn,
  ManyToOne,
  PrimaryColumn,
} from 'typeorm';
import { Organization } from './organization.entity';

export const ROLES = ['owner', 'admin', 'member'] as const;
export type Role = (typeof ROLES)[number];

@Entity('memberships')
@Check('memberships_role_check', `role IN ('owner', 'admin', 'member')`)
@Index('memberships_user_idx', ['userId', 'createdAt'])
export class Membership {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  organizationId: string;

  @PrimaryColumn({ name: 'user_id', type: 'uuid' })
  @ForeignKey('users', { onDelete: 'CASCADE', name: 'memberships_user_id_fkey' })
  userId: string;

  @Column({ type: 'text' })
  role: Role;

  @ManyToOne(() => Organization, { onDelete: 'CASCADE' })
  @JoinColumn({
    name: 'organization_id',
    foreignKeyConstraintName: 'memberships_organization_id_fkey',
  })
  organization?: Organization;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
