import { Entity, ForeignKey, Index, Unique } from 'typeorm';
import { OneTimeToken } from './one-time-token.entity';

/** A password reset link's token. */
@Entity('password_reset_tokens')
@Unique('password_reset_tokens_hash_unique', ['tokenHash'])
@Index('password_reset_tokens_user_idx', ['userId'])
@ForeignKey('users', ['userId'], ['id'], {
  onDelete: 'CASCADE',
  name: 'password_reset_tokens_user_id_fkey',
})
export class PasswordResetToken extends OneTimeToken {}
