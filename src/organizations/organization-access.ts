import { Injectable } from '@nestjs/common';
import { type CallerContext, type Scope, scopeSatisfies } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { type Sql, sql } from '../database/sql';
import type { Role } from './entities/membership.entity';
import { OrganizationsService } from './organizations.service';
import { organizationNotFound } from './team-rules';

/** What a member's role lets an access token do (contract §3). */
export const ROLE_SCOPES: Record<Role, Scope[]> = {
  owner: ['admin'],
  admin: ['admin'],
  member: ['read_write'],
};

/**
 * Who may touch an organization's settings at `/v1/organizations/{id}/…`: an API key of that
 * organization holding `scope`, or a member whose role grants it, whichever organization their
 * access token acts for otherwise. Another organization answers 404, as if it did not exist.
 */
@Injectable()
export class OrganizationAccess {
  constructor(private readonly organizations: OrganizationsService) {}

  async assert(caller: CallerContext, organizationId: string, scope: Scope): Promise<void> {
    let scopes = caller.scopes;
    if (caller.organizationId !== organizationId) {
      if (caller.kind !== 'user') throw organizationNotFound();
      const grant = await this.organizations.membership(caller.userId, organizationId);
      if (!grant) throw organizationNotFound();
      scopes = ROLE_SCOPES[grant.role];
    }
    if (!scopeSatisfies(scopes, scope)) {
      throw new AppError(
        'insufficient_scope',
        scope === 'admin'
          ? 'Changing this needs an owner or admin, or an API key with the admin scope'
          : `This needs the ${scope} scope`,
      );
    }
  }
}

/**
 * For an admin's write at `/v1/organizations/{id}/…`, in the writing statement itself: true while
 * the caller may still change the organization's settings. An API key was checked by the guard;
 * a user's membership must still be an owner's or admin's, and is locked FOR SHARE until the
 * statement's transaction ends. A removal or demotion locks the organization's memberships FOR
 * UPDATE before it commits, so a write that `assert` let through a moment before either commits
 * first or waits, finds the role gone and writes nothing (review, 2026-12-05: it wrote, as the
 * admin's action, after the demotion had answered).
 */
export function stillManages(caller: CallerContext, organizationId: string): Sql {
  if (caller.kind !== 'user') return sql`TRUE`;
  return sql`EXISTS (SELECT 1 FROM memberships
                      WHERE organization_id = ${organizationId}::uuid
                        AND user_id = ${caller.userId}::uuid
                        AND role IN ('owner', 'admin')
                        FOR SHARE)`;
}

/** 403 for a write whose caller was demoted or removed while it ran (see stillManages). */
export function noLongerManages(): AppError {
  return new AppError(
    'insufficient_scope',
    'Changing this needs an owner or admin, or an API key with the admin scope',
  );
}
