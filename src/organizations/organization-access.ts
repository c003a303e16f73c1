import { Injectable } from '@nestjs/common';
import { type CallerContext, type Scope, scopeSatisfies } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { tokenNoLongerValid } from '../users/token-version-held';
import { UsersService } from '../users/users.service';
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
  constructor(
    private readonly organizations: OrganizationsService,
    private readonly users: UsersService,
  ) {}

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

  /**
   * Why an admin's write that `assert` let through wrote nothing, its own check (stillManages)
   * having failed: the user's access token ended by a password reset meanwhile (401), or their
   * role went (403).
   */
  async writeRefused(caller: CallerContext): Promise<AppError> {
    if (caller.kind === 'user' && (await this.users.tokenEnded(caller))) {
      return tokenNoLongerValid();
    }
    return noLongerManages();
  }
}

/** 403 for a write whose caller was demoted or removed while it ran (see stillManages). */
function noLongerManages(): AppError {
  return new AppError(
    'insufficient_scope',
    'Changing this needs an owner or admin, or an API key with the admin scope',
  );
}
