import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { Columns, type RowOf } from '../database/columns';
import { sql } from '../database/sql';
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

/** The SQL of sso_identities; (provider, subject) is unique. */
@Injectable()
export class SsoRepository {
  constructor(private readonly database: Database) {}

  /** Inserts the link unless the identity is linked already (to anyone); null when it is. */
  async insertIfAbsent(fields: {
    userId: string;
    provider: string;
    subject: string;
    email: string | null;
  }): Promise<SsoIdentityRow | null> {
    const row = await this.database.row(
      IDENTITY_COLUMNS.query`INSERT INTO sso_identities (user_id, provider, subject, email)
          VALUES (${fields.userId}, ${fields.provider}, ${fields.subject}, ${fields.email})
          ON CONFLICT (provider, subject) DO NOTHING
          RETURNING ${IDENTITY_COLUMNS}`,
    );
    return row ?? null;
  }

  async findByProviderSubject(provider: string, subject: string): Promise<SsoIdentityRow | null> {
    const row = await this.database.row(
      IDENTITY_COLUMNS.query`SELECT ${IDENTITY_COLUMNS} FROM sso_identities WHERE provider = ${provider} AND subject = ${subject}`,
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

  /** Deletes the user's identity; whether there was one. */
  async deleteForUser(userId: string, id: string): Promise<boolean> {
    const deleted = await this.database.count(
      sql`DELETE FROM sso_identities WHERE id = ${id} AND user_id = ${userId}`,
    );
    return deleted > 0;
  }
}
