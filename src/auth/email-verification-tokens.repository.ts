import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import type { Row } from '../database/row';
import { sql } from '../database/sql';
import type { EmailVerificationToken } from './entities/email-verification-token.entity';

/**
 * The SQL of email_verification_tokens (stored as SHA-256 hashes). Times come from the caller
 * (the injected Clock), so expiry and the hourly cap move with a spec's clock.
 */
@Injectable()
export class EmailVerificationTokensRepository {
  constructor(private readonly database: Database) {}

  /**
   * Stores a token valid until `expiresAt`, unless the user was sent `hourlyCap` tokens in the
   * hour before `at`; answers whether it was stored.
   */
  async insertUnderHourlyCap(fields: {
    userId: string;
    tokenHash: Buffer;
    at: Date;
    expiresAt: Date;
    hourlyCap: number;
  }): Promise<boolean> {
    const stored = await this.database.count(
      sql`INSERT INTO email_verification_tokens (user_id, token_hash, created_at, expires_at)
          SELECT ${fields.userId}::uuid, ${fields.tokenHash}::bytea, ${fields.at}::timestamptz,
                 ${fields.expiresAt}::timestamptz
           WHERE (SELECT count(*) FROM email_verification_tokens
                   WHERE user_id = ${fields.userId}
                     AND created_at > ${fields.at}::timestamptz - interval '1 hour')
                 < ${fields.hourlyCap}`,
    );
    return stored > 0;
  }

  /**
   * Marks the token used if it is live at `at`; its user's id, or null. The atomic
   * `UPDATE … WHERE used_at IS NULL` lets exactly one of any number of concurrent uses through.
   */
  async spend(manager: EntityManager, tokenHash: Buffer, at: Date): Promise<string | null> {
    const row = await this.database.row<Row<EmailVerificationToken, 'userId'>>(
      sql`UPDATE email_verification_tokens SET used_at = ${at}
           WHERE token_hash = ${tokenHash} AND used_at IS NULL AND expires_at > ${at}
          RETURNING user_id`,
      { manager },
    );
    return row?.user_id ?? null;
  }

  /** Spends every token of the user still unused (the address is verified: none is needed). */
  async spendAllOf(manager: EntityManager, userId: string, at: Date): Promise<void> {
    await this.database.rows(
      sql`UPDATE email_verification_tokens SET used_at = ${at}
           WHERE user_id = ${userId} AND used_at IS NULL`,
      { manager },
    );
  }
}
