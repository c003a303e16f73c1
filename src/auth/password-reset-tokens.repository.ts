import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import type { PasswordResetToken } from './entities/password-reset-token.entity';
import { OneTimeTokensRepository } from './one-time-tokens.repository';

/** The SQL of password_reset_tokens. */
@Injectable()
export class PasswordResetTokensRepository extends OneTimeTokensRepository<PasswordResetToken> {
  constructor(database: Database) {
    super(database, 'password_reset_tokens');
  }
}
