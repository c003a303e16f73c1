import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { Role } from './entities/membership.entity';

export interface InvitationRow {
  id: string;
  organization_id: string;
  email: string;
  email_key: string;
  role: Role;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  revoked_at: Date | null;
  status: InvitationStatus;
}

export type InvitationStatus = 'pending' | 'accepted' | 'revoked' | 'expired';

/**
 * The status is derived at `now`, the SQL parameter named (the caller's injected Clock, so a
 * spec moves expiry without sleeping).
 */
const columns = (now: string) => `id, organization_id, email, email_key, role, created_at,
  expires_at, accepted_at, revoked_at,
  CASE WHEN accepted_at IS NOT NULL THEN 'accepted' WHEN revoked_at IS NOT NULL THEN 'revoked'
       WHEN expires_at <= ${now}::timestamptz THEN 'expired' ELSE 'pending' END AS status`;

/**
 * The SQL of invitations. Addresses are compared as lower(btrim(…)), like login's. Times that
 * rules depend on (creation, expiry, the derived status) come from the caller's `now`.
 */
@Injectable()
export class InvitationsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** The comparison key of an address: the normalisation login applies (trim, then lower()). */
  async emailKey(manager: EntityManager, email: string): Promise<string> {
    const rows: Array<{ key: string }> = await manager.query('SELECT lower(btrim($1)) AS key', [
      email,
    ]);
    return rows[0].key;
  }

  /**
   * Creates the invitation, or replaces the open one for the same address (new token, role and
   * expiry; the earlier link stops working). One statement on the partial unique index, so two
   * concurrent invitations of one address leave one open invitation, never two.
   */
  async upsertOpen(
    manager: EntityManager,
    fields: {
      organizationId: string;
      email: string;
      emailKey: string;
      role: Role;
      tokenHash: Buffer;
      invitedByUserId: string | null;
      now: Date;
      expiresAt: Date;
    },
  ): Promise<InvitationRow & { replaced: boolean }> {
    const rows: Array<InvitationRow & { replaced: boolean }> = await manager.query(
      `INSERT INTO invitations (organization_id, email, email_key, role, token_hash,
                                invited_by_user_id, created_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (organization_id, email_key) WHERE accepted_at IS NULL AND revoked_at IS NULL
       DO UPDATE SET email = EXCLUDED.email, role = EXCLUDED.role, token_hash = EXCLUDED.token_hash,
                     invited_by_user_id = EXCLUDED.invited_by_user_id,
                     expires_at = EXCLUDED.expires_at, created_at = EXCLUDED.created_at
       RETURNING ${columns('$7')}, (xmax <> 0) AS replaced`,
      [
        fields.organizationId,
        fields.email,
        fields.emailKey,
        fields.role,
        fields.tokenHash,
        fields.invitedByUserId,
        fields.now,
        fields.expiresAt,
      ],
    );
    return rows[0];
  }

  /** Newest first, paged by id. */
  findPage(
    organizationId: string,
    now: Date,
    limit: number,
    startingAfter?: string,
  ): Promise<InvitationRow[]> {
    return this.dataSource.query(
      `SELECT ${columns('$4')} FROM invitations
        WHERE organization_id = $1
          AND ($2::uuid IS NULL OR (created_at, id) < (
                SELECT i2.created_at, i2.id FROM invitations i2
                 WHERE i2.id = $2::uuid AND i2.organization_id = $1))
        ORDER BY created_at DESC, id DESC
        LIMIT $3`,
      [organizationId, startingAfter ?? null, limit + 1, now],
    );
  }

  /** Revokes an invitation not yet accepted or revoked; null when there is none such. */
  async revoke(
    manager: EntityManager,
    organizationId: string,
    id: string,
    now: Date,
  ): Promise<InvitationRow | null> {
    const rows: InvitationRow[] = await manager.query(
      `WITH revoked AS (
         UPDATE invitations SET revoked_at = $3
          WHERE id = $1 AND organization_id = $2 AND accepted_at IS NULL AND revoked_at IS NULL
          RETURNING ${columns('$3')})
       SELECT * FROM revoked`,
      [id, organizationId, now],
    );
    return rows[0] ?? null;
  }

  /**
   * The invitation holding this token hash, locked until the transaction ends: of two concurrent
   * acceptances the second waits, then sees it accepted.
   */
  async lockByTokenHash(
    manager: EntityManager,
    tokenHash: Buffer,
    now: Date,
  ): Promise<InvitationRow | null> {
    const rows: InvitationRow[] = await manager.query(
      `SELECT ${columns('$2')} FROM invitations WHERE token_hash = $1 FOR UPDATE`,
      [tokenHash, now],
    );
    return rows[0] ?? null;
  }

  async markAccepted(manager: EntityManager, id: string, userId: string, now: Date): Promise<void> {
    await manager.query(
      'UPDATE invitations SET accepted_at = $3, accepted_by_user_id = $2 WHERE id = $1',
      [id, userId, now],
    );
  }

  /** The organization's name and the inviter's name (or address), for the invitation e-mail. */
  async mailContext(
    manager: EntityManager,
    organizationId: string,
    inviterId: string,
  ): Promise<{ organization: string; inviter: string }> {
    const rows: Array<{ organization: string; inviter: string }> = await manager.query(
      `SELECT o.name AS organization, coalesce(u.name, u.email) AS inviter
         FROM organizations o, users u WHERE o.id = $1 AND u.id = $2`,
      [organizationId, inviterId],
    );
    return rows[0];
  }
}
