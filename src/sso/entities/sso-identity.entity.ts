import { Column, Entity, ForeignKey, Index, PrimaryGeneratedColumn, Unique } from 'typeorm';

/** An OIDC identity (provider, sub) linked to one user; unique across all users. */
@Entity('sso_identities')
@Unique('sso_identities_provider_subject_unique', ['provider', 'subject'])
@Index('sso_identities_user_idx', ['userId', 'linkedAt'])
export class SsoIdentity {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'user_id', type: 'uuid' })
  @ForeignKey('users', { onDelete: 'CASCADE', name: 'sso_identities_user_id_fkey' })
  userId: string;

  @Column({ type: 'text' })
  provider: string;

  @Column({ type: 'text' })
  subject: string;

  @Column({ type: 'text', nullable: true })
  email: string | null;

  @Column({ name: 'linked_at', type: 'timestamptz', default: () => 'now()' })
  linkedAt: Date;
}
