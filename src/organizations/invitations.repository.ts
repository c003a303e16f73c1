import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Columns, type RowOf } from '../database/columns';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { sql } from '../database/sql';
import type { User } from '../users/entities/user.entity';
import type { Invitation } from './entities/invitation.entity';
import type { Role } from './entities/membership.entity';
import type { Organization } from './entities/organization.entity';

export type InvitationStatus = 'pending' | 'accepted' | 'revoked' | 'expired';

/**
 * An invitation, its status derived at `now` (the caller's injected Clock, so a spec moves expiry
 * without sleeping).
 */
function invitationAt(now: Date) {
  return Columns.rowOf<Invitation>()(
    'id',
    'organizationId',
    'email',
    'emailKey',
    'role',
    'createdAt',
    'expiresAt',
    'acceptedAt',
    'revokedAt',
  ).and(
    Columns.computed<{ status: InvitationStatus }>({
      status: sql`CASE WHEN accepted_at IS NOT NULL THEN 'accepted'
                       WHEN revoked_at IS NOT NULL THEN 'revoked'
                       WHEN expires_at <= ${now}::timestamptz THEN 'expired' ELSE 'pending' END`,
    }),
  );
}

export type InvitationRow = RowOf<ReturnType<typeof invitationAt>>;

/** Whether an upsert replaced the open invitation (an updated row has a non-zero xmax). */
const REPLACED = Columns.computed<{ replaced: boolean }>({ replaced: sql`(xmax <> 0)` });

/** The invitation e-mail's organization `o` and inviter `u`. */
const MAIL_CONTEXT = Columns.computed<{
  organization: Organization['name'];
  inviter_email: User['email'];
  inviter_verified: boolean;
}>({
  organization: sql`o.name`,
  inviter_email: sql`u.email`,
  inviter_verified: sql`u.email_verified_at IS NOT NULL`,
});

/**
 * The SQL of invitations. Addresses are compared as lower(btrim(…)), like login's. Times that
 * rules depend on (creation, expiry, the derived status) come from the caller's `now`.
 */
@Injectable()
export class InvitationsRepository {
  constructor(private readonly database: Database) {}

  /** The comparison key of an address: the normalisation login applies (trim, then lower()). */
  async emailKey(manager: EntityManager, email: string): Promise<string> {
    const key = Columns.computed<{ key: string }>({ key: sql`lower(btrim(${email}))` });
    const row = await this.database.row(key.query`SELECT ${key}`, { manager });
    return row!.key;
  }

  /**
   * Creates the invitation, or replaces the open one for the same address (new token, role and
   * expiry; the earlier link stops working). One statement on the partial unique index, so two
   * concurrent invitations of one address leave one open invitation, never two.
   */
  async upsertOpen(
    manager: EntityManager,
    fields: Pick<
      Invitation,
      'organizationId' | 'email' | 'emailKey' | 'role' | 'tokenHash' | 'invitedByUserId'
    > & { now: Date; expiresAt: Date; byOwner: boolean },
  ): Promise<(InvitationRow & RowOf<typeof REPLACED>) | undefined> {
    const returned = invitationAt(fields.now).and(REPLACED);
    const row = await this.database.row(
      returned.query`INSERT INTO invitations (organization_id, email, email_key, role, token_hash,
                                   invited_by_user_id, created_at, expires_at)
          VALUES (${fields.organizationId}, ${fields.email}, ${fields.emailKey}, ${fields.role},
                  ${fields.tokenHash}, ${fields.invitedByUserId}, ${fields.now},
                  ${fields.expiresAt})
          ON CONFLICT (organization_id, email_key) WHERE accepted_at IS NULL AND revoked_at IS NULL
          DO UPDATE SET email = EXCLUDED.email, role = EXCLUDED.role,
                        token_hash = EXCLUDED.token_hash,
                        invited_by_user_id = EXCLUDED.invited_by_user_id,
                        expires_at = EXCLUDED.expires_at, created_at = EXCLUDED.created_at
           -- A pending invitation for owner is replaced by an owner only (an expired one can no
           -- longer make anyone an owner).
           WHERE invitations.role <> 'owner' OR ${fields.byOwner}::boolean
              OR invitations.expires_at <= ${fields.now}
          RETURNING ${returned}`,
      { manager },
    );
    return row;
  }

  /**
   * Counts one invitation sent by the organization on `day` (a UTC date, `YYYY-MM-DD`) unless
   * it sent `cap` that day already; answers whether it was counted. One UPDATE of the
   * organization's row: concurrent invitations serialise on it.
   */
  async countSent(
    manager: EntityManager,
    organizationId: string,
    day: string,
    cap: number,
  ): Promise<boolean> {
    const counted = await this.database.count(
      sql`UPDATE organizations
             SET invitations_sent = CASE WHEN invitations_day = ${day}::date
                                         THEN invitations_sent + 1 ELSE 1 END,
                 invitations_day = ${day}::date
           WHERE id = ${organizationId}
             AND (invitations_day IS DISTINCT FROM ${day}::date OR invitations_sent < ${cap})`,
      { manager },
    );
    return counted > 0;
  }

  /**
   * Counts one invitation sent by the user on `day`, across all their organizations, unless they
   * sent `cap` that day already; answers whether it was counted. One upsert of the user's row
   * (ON CONFLICT takes the row lock even when its WHERE refuses): concurrent invitations of one
   * user serialise on it, whichever organizations they go to.
   */
  async countSentBy(
    manager: EntityManager,
    userId: string,
    day: string,
    cap: number,
  ): Promise<boolean> {
    const counted = await this.database.count(
      sql`INSERT INTO inviter_days (user_id, day, sent) VALUES (${userId}, ${day}::date, 1)
          ON CONFLICT (user_id) DO UPDATE
             SET sent = CASE WHEN inviter_days.day = EXCLUDED.day THEN inviter_days.sent + 1
                             ELSE 1 END,
                 day = EXCLUDED.day
           WHERE inviter_days.day <> EXCLUDED.day OR inviter_days.sent < ${cap}`,
      { manager },
    );
    return counted > 0;
  }

  /** Newest first, paged by id. */
  findPage(
    organizationId: string,
    now: Date,
    limit: number,
    startingAfter?: string,
  ): Promise<InvitationRow[]> {
    const page: Keyset = {
      table: 'invitations',
      cursor: startingAfter,
      scope: { organization_id: organizationId },
      order: 'desc',
    };
    const invitation = invitationAt(now);
    return this.database.rows(
      invitation.query`SELECT ${invitation} FROM invitations
           WHERE organization_id = ${organizationId} AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  /** Revokes an invitation not yet accepted or revoked; null when there is none such. */
  async revoke(
    manager: EntityManager,
    organizationId: string,
    id: string,
    now: Date,
  ): Promise<InvitationRow | null> {
    const invitation = invitationAt(now);
    const row = await this.database.row(
      invitation.query`UPDATE invitations SET revoked_at = ${now}
           WHERE id = ${id} AND organization_id = ${organizationId}
             AND accepted_at IS NULL AND revoked_at IS NULL
          RETURNING ${invitation}`,
      { manager },
    );
    return row ?? null;
  }

  /**
   * Revokes the pending invitations `userId` sent in the organization, those of `roles` only
   * when given; answers them.
   */
  async revokeSentBy(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    roles: readonly Role[] | null,
    now: Date,
  ): Promise<InvitationRow[]> {
    const invitation = invitationAt(now);
    return this.database.rows(
      invitation.query`UPDATE invitations SET revoked_at = ${now}
           WHERE organization_id = ${organizationId} AND invited_by_user_id = ${userId}
             AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > ${now}
             AND (${roles}::text[] IS NULL OR role = ANY (${roles}::text[]))
          RETURNING ${invitation}`,
      { manager },
    );
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
    const invitation = invitationAt(now);
    const row = await this.database.row(
      invitation.query`SELECT ${invitation} FROM invitations
           WHERE token_hash = ${tokenHash} FOR UPDATE`,
      { manager },
    );
    return row ?? null;
  }

  /**
   * Whether the invitation's sender still holds a role that may send it (an owner any, an admin
   * all but owner invitations). Read, not locked: a removal or demotion revokes the invitations
   * it takes away in its own transaction, which waits for the invitation's row this acceptance
   * holds; this catches those sent before that revocation existed.
   */
  async senderMayStillSend(manager: EntityManager, id: string): Promise<boolean> {
    const held = await this.database.count(
      sql`SELECT 1 FROM invitations i
            JOIN memberships m ON m.organization_id = i.organization_id
                              AND m.user_id = i.invited_by_user_id
           WHERE i.id = ${id}
             AND (m.role = 'owner' OR (m.role = 'admin' AND i.role <> 'owner'))`,
      { manager },
    );
    return held > 0;
  }

  async markAccepted(manager: EntityManager, id: string, userId: string, now: Date): Promise<void> {
    await this.database.count(
      sql`UPDATE invitations SET accepted_at = ${now}, accepted_by_user_id = ${userId}
           WHERE id = ${id}`,
      { manager },
    );
  }

  /**
   * The organization's name and the inviter's address for the invitation e-mail, and whether
   * that address is verified (inviting needs it). Read after MembersRepository
   * .assertActorTokenHolds in the same transaction: a password reset (which marks the address
   * verified too) either committed before that check, which refused the squatter's token, or
   * waits for this transaction.
   */
  async mailContext(
    manager: EntityManager,
    organizationId: string,
    inviterId: string,
  ): Promise<RowOf<typeof MAIL_CONTEXT> | undefined> {
    return this.database.row(
      MAIL_CONTEXT.query`SELECT ${MAIL_CONTEXT}
            FROM organizations o, users u
           WHERE o.id = ${organizationId} AND u.id = ${inviterId}`,
      { manager },
    );
  }
}
