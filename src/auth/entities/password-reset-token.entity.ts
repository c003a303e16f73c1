import { Column, Entity, ForeignKey, Index, PrimaryGeneratedColumn, Unique } from 'typeorm';

/** A password reset link's token, stored only as its SHA-256; spent once. */
@Entity('password_reset_tokens')
@Unique('password_reset_tokens_hash_unique', ['tokenHash'])
@Index('password_reset_tokens_user_idx', ['userId'])
export class PasswordResetToken {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'user_id', type: 'uuid' })
  @ForeignKey('users', { onDelete: 'CASCADE', name: 'password_reset_tokens_user_id_fkey' })
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
