import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { SsoIdentityRow } from './dto/sso.dto';

const COLUMNS = 'id, user_id, provider, subject, email, linked_at';

/** The SQL of sso_identities; (provider, subject) is unique. */
@Injectable()
export class SsoRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Inserts the link unless the identity is linked already (to anyone); null when it is. */
  async insertIfAbsent(fields: {
    userId: string;
    provider: string;
    subject: string;
    email: string | null;
  }): Promise<SsoIdentityRow | null> {
    const rows: SsoIdentityRow[] = await this.dataSource.query(
      `INSERT INTO sso_identities (user_id, provider, subject, email) VALUES ($1, $2, $3, $4)
       ON CONFLICT (provider, subject) DO NOTHING
       RETURNING ${COLUMNS}`,
      [fields.userId, fields.provider, fields.subject, fields.email],
    );
    return rows[0] ?? null;
  }

  async findByProviderSubject(provider: string, subject: string): Promise<SsoIdentityRow | null> {
    const rows: SsoIdentityRow[] = await this.dataSource.query(
      `SELECT ${COLUMNS} FROM sso_identities WHERE provider = $1 AND subject = $2`,
      [provider, subject],
    );
    return rows[0] ?? null;
  }

  /** The user's identities, oldest link first, paged by id. */
  findPageForUser(
    userId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<SsoIdentityRow[]> {
    return this.dataSource.query(
      `SELECT ${COLUMNS} FROM sso_identities
        WHERE user_id = $1
          AND ($2::uuid IS NULL OR (linked_at, id) > (
                SELECT s.linked_at, s.id FROM sso_identities s WHERE s.id = $2::uuid AND s.user_id = $1))
        ORDER BY linked_at, id
        LIMIT $3`,
      [userId, startingAfter ?? null, limit + 1],
    );
  }

  /** Deletes the user's identity; whether there was one. */
  async deleteForUser(userId: string, id: string): Promise<boolean> {
    const rows: unknown[] = await this.dataSource.query(
      `WITH gone AS (DELETE FROM sso_identities WHERE id = $1 AND user_id = $2 RETURNING id)
       SELECT id FROM gone`,
      [id, userId],
    );
    return rows.length > 0;
  }
}
