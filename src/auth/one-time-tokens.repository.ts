import type { EntityManager } from 'typeorm';
import type { Database } from '../database/database';
import { Columns } from '../database/columns';
import { empty, raw, sql, type Sql } from '../database/sql';
import type { OneTimeToken } from './entities/one-time-token.entity';

const TOKEN_USER = Columns.rowOf<OneTimeToken>()('userId');

/** A token to store: its hash only, issued at `at`. */
export interface NewToken {
  userId: string;
  tokenHash: Buffer;
  at: Date;
  expiresAt: Date;
}

/**
 * The SQL of a table of single-use tokens sent by mail (stored as SHA-256 hashes): password
 * resets and e-mail verifications share it, each repository naming its table. Times come from
 * the caller (the injected Clock), so expiry and the hourly cap move with a spec's clock.
 */
export abstract class OneTimeTokensRepository {
  private readonly table: Sql;

  protected constructor(
    private readonly database: Database,
    private readonly tableName: 'password_reset_tokens' | 'email_verification_tokens',
  ) {
    this.table = raw(tableName);
  }

  /**
   * Stores a token valid until `expiresAt`, unless the user was sent `hourlyCap` tokens in the
   * hour before `at`; answers whether it was stored. A statement counts on its own snapshot,
   * blind to a concurrent insert, so one request of a user counts at a time (an advisory lock
   * per table and user); one that finds another counting is refused as over the cap, since that
   * one's mail goes out, and a burst neither passes the cap nor queues on the pool.
   */
  insertUnderHourlyCap(fields: NewToken & { hourlyCap: number }): Promise<boolean> {
    return this.database.transaction(async (manager) => {
      const key = `${this.tableName}:${fields.userId}`;
      const counting = Columns.computed<{ counting: boolean }>({
        counting: sql`pg_try_advisory_xact_lock(hashtextextended(${key}, 0))`,
      });
      const lock = await this.database.row(counting.query`SELECT ${counting}`, { manager });
      if (!lock?.counting) return false;
      const stored = await this.database.count(
        this.insertToken(
          fields,
          sql`WHERE (SELECT count(*) FROM ${this.table}
                      WHERE user_id = ${fields.userId}
                        AND created_at > ${fields.at}::timestamptz - interval '1 hour')
                    < ${fields.hourlyCap}`,
        ),
        { manager },
      );
      return stored > 0;
    });
  }

  /**
   * Stores a token valid until `expiresAt` outside the hourly cap, and without its lock: for
   * mail the user did not ask for and that must not be dropped (the lockout notice). It still
   * counts toward the cap of the requests after it.
   */
  async insert(fields: NewToken): Promise<void> {
    await this.database.count(this.insertToken(fields));
  }

  /** The INSERT of a token; `condition` (a WHERE clause) may keep it from being stored. */
  private insertToken(fields: NewToken, condition: Sql = empty): Sql {
    return sql`INSERT INTO ${this.table} (user_id, token_hash, created_at, expires_at)
      SELECT ${fields.userId}::uuid, ${fields.tokenHash}::bytea, ${fields.at}::timestamptz,
             ${fields.expiresAt}::timestamptz
      ${condition}`;
  }

  /** Whether the token is unused and not expired at `at`. */
  async isLive(tokenHash: Buffer, at: Date): Promise<boolean> {
    const found = await this.database.count(
      sql`SELECT 1 FROM ${this.table}
           WHERE token_hash = ${tokenHash} AND used_at IS NULL AND expires_at > ${at}`,
    );
    return found > 0;
  }

  /** The user of the token if it is live at `at`, or null; locks nothing. */
  async ownerOf(manager: EntityManager, tokenHash: Buffer, at: Date): Promise<string | null> {
    const row = await this.database.row(
      TOKEN_USER.query`SELECT ${TOKEN_USER} FROM ${this.table}
           WHERE token_hash = ${tokenHash} AND used_at IS NULL AND expires_at > ${at}`,
      { manager },
    );
    return row?.user_id ?? null;
  }

  /**
   * Marks the token used if it is live at `at`; its user's id, or null. The atomic
   * `UPDATE … WHERE used_at IS NULL` lets exactly one of any number of concurrent uses through.
   */
  async spend(manager: EntityManager, tokenHash: Buffer, at: Date): Promise<string | null> {
    const row = await this.database.row(
      TOKEN_USER.query`UPDATE ${this.table} SET used_at = ${at}
           WHERE token_hash = ${tokenHash} AND used_at IS NULL AND expires_at > ${at}
          RETURNING ${TOKEN_USER}`,
      { manager },
    );
    return row?.user_id ?? null;
  }

  /** Spends every token of the user still unused. */
  async spendAllOf(manager: EntityManager, userId: string, at: Date): Promise<void> {
    await this.database.count(
      sql`UPDATE ${this.table} SET used_at = ${at}
           WHERE user_id = ${userId} AND used_at IS NULL`,
      { manager },
    );
  }
}
