import type { CallerContext } from '../common/auth/caller';
import { type Sql, sql } from '../database/sql';
import { tokenVersionHeld } from './token-version-held';

/**
 * The user's membership of the organization while it is an owner's or admin's and their access
 * token still holds (`tokenVersion`, see tokenVersionHeld), for a write to check in its own
 * statement. The membership is locked FOR SHARE until the transaction ends: a removal or demotion
 * locks the organization's memberships FOR UPDATE before it commits, so a write let through a
 * moment before either commits first or waits, finds the role gone and writes nothing. The
 * user's row is locked FOR KEY SHARE, which a password reset's FOR UPDATE waits for (and the other
 * way round): a request authenticated before a reset committed writes nothing after it.
 *
 * Here, below organizations and api-keys, because both check it (organizations imports api-keys).
 */
export function managerMembership(organizationId: string, userId: string, tokenVersion?: number) {
  return sql`SELECT m.user_id FROM memberships m JOIN users u ON u.id = m.user_id
       WHERE m.organization_id = ${organizationId}::uuid AND m.user_id = ${userId}::uuid
         AND m.role IN ('owner', 'admin')
         AND ${tokenVersionHeld(sql`u.token_version`, tokenVersion)}
         FOR SHARE OF m FOR KEY SHARE OF u`;
}

/**
 * For an admin's write, in the writing statement itself: true while the caller may still change
 * the organization's settings or keys. An API key was checked by the guard; a user must still
 * hold managerMembership with the token they asked with (review, 2026-12-05: a PATCH let through
 * a moment before a demotion wrote after it, as the admin's action).
 */
export function stillManages(caller: CallerContext, organizationId: string): Sql {
  if (caller.kind !== 'user') return sql`TRUE`;
  return sql`EXISTS (${managerMembership(organizationId, caller.userId, caller.tokenVersion)})`;
}
