import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import { OneTimeTokensRepository } from './one-time-tokens.repository';

/**
 * The SQL of email_verification_tokens. Once the address is verified, spendAllOf spends the
 * user's other tokens: none is needed any more.
 */
@Injectable()
export class EmailVerificationTokensRepository extends OneTimeTokensRepository {
  constructor(database: Database) {
    super(database, 'email_verification_tokens');
  }
}
