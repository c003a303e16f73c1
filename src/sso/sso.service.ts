import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AccessTokensService } from '../auth/access-tokens.service';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import { UsersService } from '../users/users.service';
import { SsoIdentityDto, SsoIdentityRow, toSsoIdentityResponse } from './dto/sso.dto';
import { IdTokenVerifier } from './id-token-verifier.service';

const COLUMNS = 'id, user_id, provider, subject, email, linked_at';

@Injectable()
export class SsoService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly verifier: IdTokenVerifier,
    private readonly users: UsersService,
    private readonly tokens: AccessTokensService,
  ) {}

  /**
   * Links the identity to the user. The unique (provider, subject) index decides races: of two
   * users linking one identity at once, one INSERT wins (201) and the other reads the winner's
   * row (409); the same user linking twice reads their own row (200).
   */
  async link(
    userId: string,
    providerId: string,
    idToken: string,
  ): Promise<{ created: boolean; identity: SsoIdentityDto }> {
    const verified = await this.verifier.verify(providerId, idToken);
    // A row unlinked between our INSERT and SELECT frees the identity: try again.
    for (let attempt = 0; attempt < 3; attempt++) {
      const inserted: SsoIdentityRow[] = await this.dataSource.query(
        `INSERT INTO sso_identities (user_id, provider, subject, email) VALUES ($1, $2, $3, $4)
         ON CONFLICT (provider, subject) DO NOTHING
         RETURNING ${COLUMNS}`,
        [userId, verified.provider, verified.subject, verified.email],
      );
      if (inserted[0]) return { created: true, identity: toSsoIdentityResponse(inserted[0]) };
      const [existing]: SsoIdentityRow[] = await this.dataSource.query(
        `SELECT ${COLUMNS} FROM sso_identities WHERE provider = $1 AND subject = $2`,
        [verified.provider, verified.subject],
      );
      if (!existing) continue;
      if (existing.user_id !== userId) {
        throw new AppError(
          'sso_identity_taken',
          'This identity is already linked to another account',
        );
      }
      return { created: false, identity: toSsoIdentityResponse(existing) };
    }
    throw new Error('SSO identity link did not settle');
  }

  async list(userId: string, limit: number, startingAfter?: string): Promise<Page<SsoIdentityDto>> {
    const rows: SsoIdentityRow[] = await this.dataSource.query(
      `SELECT ${COLUMNS} FROM sso_identities
        WHERE user_id = $1
          AND ($2::uuid IS NULL OR (linked_at, id) > (
                SELECT s.linked_at, s.id FROM sso_identities s WHERE s.id = $2::uuid AND s.user_id = $1))
        ORDER BY linked_at, id
        LIMIT $3`,
      [userId, startingAfter ?? null, limit + 1],
    );
    return toPage(rows, limit, toSsoIdentityResponse);
  }

  async unlink(userId: string, id: string): Promise<void> {
    const rows: unknown[] = await this.dataSource.query(
      `WITH gone AS (DELETE FROM sso_identities WHERE id = $1 AND user_id = $2 RETURNING id)
       SELECT id FROM gone`,
      [id, userId],
    );
    if (rows.length === 0) throw AppError.notFound('SSO identity');
  }

  /** Logs in the linked user. Not subject to the password lockout: no password is involved. */
  async login(providerId: string, idToken: string) {
    const verified = await this.verifier.verify(providerId, idToken);
    const [row]: Array<{ user_id: string }> = await this.dataSource.query(
      'SELECT user_id FROM sso_identities WHERE provider = $1 AND subject = $2',
      [verified.provider, verified.subject],
    );
    const user = row ? await this.users.findById(row.user_id) : null;
    if (!user) throw AppError.unauthenticated();
    return this.tokens.issue(user.id, user.tokenVersion);
  }
}
