import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { Columns, type RowOf } from '../database/columns';
import { sql } from '../database/sql';
import { tokenVersionHeld } from '../users/token-version-held';
import type { SsoIdentity } from './entities/sso-identity.entity';

const IDENTITY_COLUMNS = Columns.rowOf<SsoIdentity>()(
  'id',
  'userId',
  'provider',
  'subject',
  'email',
  'linkedAt',
);

export type SsoIdentityRow = RowOf<typeof IDENTITY_COLUMNS>;

/** An identity `s` with its user `u`'s token version. */
const LINKED_IDENTITY = Columns.rowOf<SsoIdentity>('s')('id', 'userId').and(
  Columns.computed<{ token_version: number }>({ token_version: sql`u.token_version` }),
);

export type LinkedIdentityRow = RowOf<typeof LINKED_IDENTITY>;

const LINKED_COLUMNS = IDENTITY_COLUMNS.and(
  Columns.computed<{ created: boolean }>({ created: sql`(xmax = 0)` }),
);

/** The SQL of sso_identities; (provider, subject) is unique. */
@Injectable()
export class SsoRepository {
  constructor(private readonly database: Database) {}

  /**
   * Links the identity to the user unless it is linked already (to anyone): the row as it stands
   * once this statement has run, `created` when it wrote it (a new row's xmax is 0). One
   * statement whatever runs beside it: ON CONFLICT DO UPDATE (a no-op update) returns the
   * conflicting row, locked, where DO NOTHING returned nothing and the read after it could find
   * the row gone (an unlink in between) and had to start over.
   *
   * Only while the user's row still holds `tokenVersion` (the access token's), locked FOR KEY
   * SHARE, which a password reset's FOR UPDATE waits for and the other way round: a link asked
   * for before a reset committed makes nothing after it. Undefined when the version changed (or
   * the user is gone).
   */
  async link(fields: {
    userId: string;
    tokenVersion?: number;
    provider: string;
    subject: string;
    email: string | null;
  }): Promise<(SsoIdentityRow & { created: boolean }) | undefined> {
    return this.database.row(
      LINKED_COLUMNS.query`WITH holder AS MATERIALIZED (
            SELECT id FROM users
             WHERE id = ${fields.userId}
               AND ${tokenVersionHeld(sql`token_version`, fields.tokenVersion)}
               FOR KEY SHARE)
          INSERT INTO sso_identities (user_id, provider, subject, email)
          SELECT holder.id, ${fields.provider}, ${fields.subject}, ${fields.email} FROM holder
          ON CONFLICT (provider, subject) DO UPDATE SET provider = EXCLUDED.provider
          RETURNING ${LINKED_COLUMNS}`,
    );
  }

  /** In the caller's transaction: every identity linked to the user is unlinked. */
  async unlinkEvery(manager: EntityManager, userId: string): Promise<void> {
    await this.database.count(sql`DELETE FROM sso_identities WHERE user_id = ${userId}`, {
      manager,
    });
  }

  /**
   * The identity and its user's token version, read in one statement: a password reset unlinks
   * the identities and raises the version in one transaction, so a login sees either the
   * identity with the version the reset ends, or no identity; read apart, a login straddling the
   * reset issued a token of the new version to the identity the reset had just unlinked.
   */
  async findByProviderSubject(
    provider: string,
    subject: string,
  ): Promise<LinkedIdentityRow | null> {
    const row = await this.database.row(
      LINKED_IDENTITY.query`SELECT ${LINKED_IDENTITY}
            FROM sso_identities s JOIN users u ON u.id = s.user_id
           WHERE s.provider = ${provider} AND s.subject = ${subject}`,
    );
    return row ?? null;
  }

  /** The user's identities, oldest link first, paged by id. */
  findPageForUser(
    userId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<SsoIdentityRow[]> {
    const page: Keyset = {
      table: 'sso_identities',
      sortBy: 'linked_at',
      cursor: startingAfter,
      scope: { user_id: userId },
      order: 'asc',
    };
    return this.database.rows(
      IDENTITY_COLUMNS.query`SELECT ${IDENTITY_COLUMNS} FROM sso_identities
           WHERE user_id = ${userId} AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  /** Unlinks the user's identity; false when they have none of that id. */
  async deleteForUser(userId: string, id: string): Promise<boolean> {
    const deleted = await this.database.count(
      sql`DELETE FROM sso_identities WHERE id = ${id} AND user_id = ${userId}`,
    );
    return deleted > 0;
  }
}
