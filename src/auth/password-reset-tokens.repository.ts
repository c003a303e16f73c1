import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import { OneTimeTokensRepository } from './one-time-tokens.repository';

/** The SQL of password_reset_tokens. */
@Injectable()
export class PasswordResetTokensRepository extends OneTimeTokensRepository {
  constructor(database: Database) {
    super(database, 'password_reset_tokens');
  }
}
