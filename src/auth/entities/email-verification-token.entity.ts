import { Entity, ForeignKey, Index, Unique } from 'typeorm';
import { OneTimeToken } from './one-time-token.entity';

/** An e-mail verification link's token. */
@Entity('email_verification_tokens')
@Unique('email_verification_tokens_hash_unique', ['tokenHash'])
@Index('email_verification_tokens_user_idx', ['userId'])
@ForeignKey('users', ['userId'], ['id'], {
  onDelete: 'CASCADE',
  name: 'email_verification_tokens_user_id_fkey',
})
export class EmailVerificationToken extends OneTimeToken {}
