import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** An OIDC identity (provider, sub) linked to one user; unique across all users. */
@Entity('sso_identities')
export class SsoIdentity {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'user_id', type: 'uuid' })
  userId: string;

  @Column({ type: 'text' })
  provider: string;

  @Column({ type: 'text' })
  subject: string;

  @Column({ type: 'text', nullable: true })
  email: string | null;

  @Column({ name: 'linked_at', type: 'timestamptz' })
  linkedAt: Date;
}
