import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { Columns, type RowOf } from '../database/columns';
import { sql } from '../database/sql';
import type { User } from './entities/user.entity';

/** Every column of users, aliased to the entity's properties. */
const USER_COLUMNS = Columns.propertiesOf<User>()(
  'id',
  'email',
  'name',
  'passwordHash',
  'emailVerifiedAt',
  'organizationsCreated',
  'tokenVersion',
  'createdAt',
  'updatedAt',
);

const TOKEN_VERSION = Columns.rowOf<User>()('tokenVersion');
const LINKED = Columns.computed<{ linked: boolean }>({ linked: sql`l.linked` });
const SIGNED_OUT = Columns.computed<{ signed_out: boolean }>({ signed_out: sql`s.signed_out` });

/** Expired sign-outs a sign-out purges. */
const SIGNED_OUT_PURGE_BATCH = 100;
/** How long a sign-out is kept past its token's expiry: clocks of instances may differ. */
const SIGNED_OUT_KEPT_PAST_EXPIRY_MS = 10 * 60_000;

const EMAIL = Columns.rowOf<User>()('email');

/** Whether the address had been verified (before a reset marks it). */
const WAS_VERIFIED = Columns.computed<{ was_verified: boolean }>({
  was_verified: sql`email_verified_at IS NOT NULL`,
});

/** A reset's answer: the address, and whether it had been verified before the reset. */
export type PasswordReplaced = RowOf<typeof EMAIL> & RowOf<typeof WAS_VERIFIED>;

/**
 * The SQL of users. Addresses are unique and looked up case-insensitively (the lower(email)
 * unique index), which TypeORM's find options cannot say: hence SQL throughout.
 */
@Injectable()
export class UsersRepository {
  constructor(private readonly database: Database) {}

  async findById(id: string): Promise<User | null> {
    const row = await this.database.row(
      USER_COLUMNS.query`SELECT ${USER_COLUMNS} FROM users WHERE id = ${id}`,
    );
    return row ?? null;
  }

  async findByEmail(email: string): Promise<User | null> {
    const row = await this.database.row(
      USER_COLUMNS.query`SELECT ${USER_COLUMNS} FROM users WHERE lower(email) = lower(${email})`,
    );
    return row ?? null;
  }

  /** Inserts the user unless the address is taken (any case); null when it is. */
  async insertIfEmailFree(
    manager: EntityManager,
    fields: Pick<User, 'email' | 'name' | 'passwordHash'>,
  ): Promise<User | null> {
    const row = await this.database.row(
      USER_COLUMNS.query`INSERT INTO users (email, name, password_hash)
          VALUES (${fields.email}, ${fields.name}, ${fields.passwordHash})
          ON CONFLICT (lower(email)) DO NOTHING
          RETURNING ${USER_COLUMNS}`,
      { manager },
    );
    return row ?? null;
  }

  /** The user's token version; null when the user does not exist. */
  async tokenVersion(userId: string): Promise<number | null> {
    const row = await this.database.row(
      TOKEN_VERSION.query`SELECT ${TOKEN_VERSION} FROM users WHERE id = ${userId}`,
    );
    return row?.token_version ?? null;
  }

  /** Whether the access token whose SHA-256 is `tokenHash` was signed out of. */
  async signedOut(tokenHash: Buffer): Promise<boolean> {
    const row = await this.database.row(
      SIGNED_OUT.query`SELECT ${SIGNED_OUT} FROM (SELECT EXISTS (
          SELECT FROM signed_out_tokens WHERE token_hash = ${tokenHash}) AS signed_out) s`,
    );
    return row?.signed_out ?? false;
  }

  /**
   * Records that the user signed out of the access token whose SHA-256 is `tokenHash`, valid
   * until `expiresAt` (again: nothing more), and purges up to SIGNED_OUT_PURGE_BATCH records of
   * tokens expired SIGNED_OUT_KEPT_PAST_EXPIRY before `now`: every sign-out clears more than it
   * adds, with no worker of its own. The margin covers clocks that differ between instances (the
   * token's `exp` is checked against each one's own); rows another sign-out is purging are
   * skipped, not waited for.
   */
  async signOut(userId: string, tokenHash: Buffer, expiresAt: Date, now: Date): Promise<void> {
    const purgeBefore = new Date(now.getTime() - SIGNED_OUT_KEPT_PAST_EXPIRY_MS);
    await this.database.count(
      sql`WITH purged AS (
            DELETE FROM signed_out_tokens
             WHERE token_hash IN (SELECT token_hash FROM signed_out_tokens
                                   WHERE expires_at < ${purgeBefore}
                                   ORDER BY expires_at LIMIT ${SIGNED_OUT_PURGE_BATCH}
                                     FOR UPDATE SKIP LOCKED))
          INSERT INTO signed_out_tokens (token_hash, user_id, expires_at)
          VALUES (${tokenHash}, ${userId}, ${expiresAt})
          ON CONFLICT (token_hash) DO NOTHING`,
    );
  }

  /** Whether the SSO identity `identityId` is linked to the user. */
  async identityLinked(userId: string, identityId: string): Promise<boolean> {
    const row = await this.database.row(
      LINKED.query`SELECT ${LINKED} FROM (SELECT EXISTS (
          SELECT FROM sso_identities WHERE id = ${identityId} AND user_id = ${userId}) AS linked) l`,
    );
    return row?.linked ?? false;
  }

  /**
   * Sets the password hash (at `at`) and raises the token version; the user's e-mail, or null
   * when gone.
   */
  async replacePassword(
    manager: EntityManager,
    userId: string,
    passwordHash: string,
    at: Date,
  ): Promise<PasswordReplaced | null> {
    // The row first, in a statement of its own: a link or a key made with the user's access
    // token holds it FOR KEY SHARE, so this waits for those in progress, and the statements
    // after it (the reset's participants' too) see what they committed.
    const before = await this.database.row(
      WAS_VERIFIED.query`SELECT ${WAS_VERIFIED} FROM users WHERE id = ${userId} FOR UPDATE`,
      { manager },
    );
    if (!before) return null;
    const row = await this.database.row(
      EMAIL.query`UPDATE users
             SET password_hash = ${passwordHash}, token_version = token_version + 1,
                 email_verified_at = coalesce(email_verified_at, ${at}::timestamptz),
                 updated_at = ${at}
           WHERE id = ${userId}
          RETURNING ${EMAIL}`,
      { manager },
    );
    return row ? { ...row, ...before } : null;
  }

  /** Records, at `at`, that the user verified their address (the first time counts). */
  async markEmailVerified(manager: EntityManager, userId: string, at: Date): Promise<void> {
    await this.database.count(
      sql`UPDATE users SET email_verified_at = coalesce(email_verified_at, ${at}::timestamptz)
           WHERE id = ${userId}`,
      { manager },
    );
  }

  /**
   * Counts one more organization created by the user unless they have created `cap` already;
   * answers whether it was counted. One atomic UPDATE: concurrent creations serialise on the
   * user's row, so no more than `cap` ever pass.
   */
  async countOrganizationCreated(
    manager: EntityManager,
    userId: string,
    cap: number,
  ): Promise<boolean> {
    const counted = await this.database.count(
      sql`UPDATE users SET organizations_created = organizations_created + 1
           WHERE id = ${userId} AND organizations_created < ${cap}`,
      { manager },
    );
    return counted > 0;
  }
}
