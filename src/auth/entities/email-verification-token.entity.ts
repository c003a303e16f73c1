import { Column, Entity, ForeignKey, Index, PrimaryGeneratedColumn, Unique } from 'typeorm';

/** An e-mail verification link's token, stored only as its SHA-256; spent once. */
@Entity('email_verification_tokens')
@Unique('email_verification_tokens_hash_unique', ['tokenHash'])
@Index('email_verification_tokens_user_idx', ['userId'])
export class EmailVerificationToken {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'user_id', type: 'uuid' })
  @ForeignKey('users', { onDelete: 'CASCADE', name: 'email_verification_tokens_user_id_fkey' })
  userId: string;

  @Column({ name: 'token_hash', type: 'bytea' })
  tokenHash: Buffer;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  @Column({ name: 'used_at', type: 'timestamptz', nullable: true })
  usedAt: Date | null;
}
