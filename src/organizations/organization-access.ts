import { Injectable } from '@nestjs/common';
import { type CallerContext, type Scope, scopeSatisfies } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
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
