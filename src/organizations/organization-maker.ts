import { raw, type Sql } from '../database/sql';

/**
 * The user who made the organization aliased `alias` or, for one made before that was kept, its
 * first member; null when it has neither. An organization's account is its maker
 * (OrganizationsService.accountOf): what the instance's shared workers are fair between, so that
 * one user's ten organizations are one share, not ten.
 */
export function makerOf(alias: string): Sql {
  return raw(`coalesce(${alias}.created_by_user_id, (
               SELECT m.user_id FROM memberships m WHERE m.organization_id = ${alias}.id
                ORDER BY m.created_at, m.user_id LIMIT 1))`);
}
