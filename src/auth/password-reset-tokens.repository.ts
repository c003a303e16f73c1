import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';

/**
 * The SQL of password_reset_tokens (stored as SHA-256 hashes). Times come from the caller (the
 * injected Clock), so expiry and the hourly cap move with a spec's clock.
 */
@Injectable()
export class PasswordResetTokensRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

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
    const rows: unknown[] = await this.dataSource.query(
      `INSERT INTO password_reset_tokens (user_id, token_hash, created_at, expires_at)
       SELECT $1, $2, $3, $4
        WHERE (SELECT count(*) FROM password_reset_tokens
                WHERE user_id = $1 AND created_at > $3::timestamptz - interval '1 hour') < $5
       RETURNING id`,
      [fields.userId, fields.tokenHash, fields.at, fields.expiresAt, fields.hourlyCap],
    );
    return rows.length > 0;
  }

  /** Whether the token is unused and not expired at `at`. */
  async isLive(tokenHash: Buffer, at: Date): Promise<boolean> {
    const rows: unknown[] = await this.dataSource.query(
      `SELECT 1 FROM password_reset_tokens
        WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2`,
      [tokenHash, at],
    );
    return rows.length > 0;
  }

  /**
   * Marks the token used if it is live at `at`; its user's id, or null. The atomic
   * `UPDATE … WHERE used_at IS NULL` lets exactly one of any number of concurrent uses through.
   */
  async spend(manager: EntityManager, tokenHash: Buffer, at: Date): Promise<string | null> {
    const rows: Array<{ user_id: string }> = await manager.query(
      `WITH used AS (
         UPDATE password_reset_tokens SET used_at = $2
          WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2
          RETURNING user_id)
       SELECT user_id FROM used`,
      [tokenHash, at],
    );
    return rows[0]?.user_id ?? null;
  }

  /** Spends every token of the user still unused. */
  async spendAllOf(manager: EntityManager, userId: string, at: Date): Promise<void> {
    await manager.query(
      'UPDATE password_reset_tokens SET used_at = $2 WHERE user_id = $1 AND used_at IS NULL',
      [userId, at],
    );
  }
}
