import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/**
 * An access token its holder signed out of (POST /v1/auth/logout): refused from then on, by its
 * SHA-256 (never the token itself), until it would have expired anyway; then purged. Deleted
 * with its user.
 */
@Entity('signed_out_tokens')
@Index('signed_out_tokens_expires_at_idx', ['expiresAt'])
@Index('signed_out_tokens_user_id_idx', ['userId'])
@ForeignKey('users', ['userId'], ['id'], {
  onDelete: 'CASCADE',
  name: 'signed_out_tokens_user_id_fkey',
})
export class SignedOutToken {
  @PrimaryColumn({
    name: 'token_hash',
    type: 'bytea',
    primaryKeyConstraintName: 'signed_out_tokens_pkey',
  })
  tokenHash: Buffer;

  @Column({ name: 'user_id', type: 'uuid' })
  userId: string;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;
}
