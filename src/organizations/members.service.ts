import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { ApiKeysService, type RevokedKeys } from '../api-keys/api-keys.service';
import { AuditService } from '../audit/audit.service';
import { WebhookEventsService } from '../webhooks/webhook-events.service';
import type { ActingUserCaller } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { type Page, toPage } from '../common/pagination/pagination';
import { Clock } from '../common/time/clock';
import { Database } from '../database/database';
import { MemberDto, toMemberResponse } from './dto/member.dto';
import type { Role } from './entities/membership.entity';
import { InvitationsRepository } from './invitations.repository';
import { MembersRepository } from './members.repository';
import { OrganizationsService } from './organizations.service';
import { assertManager, assertOwner, lastOwner, organizationNotFound } from './team-rules';

const memberNotFound = () => AppError.notFound('Member');

/**
 * Member management. Every change locks the organization's memberships first (so concurrent
 * changes run one after the other and the owner count they check is the true one), writes its
 * audit event in the same transaction and, once committed, makes every instance forget the
 * member's cached grant before answering.
 */
@Injectable()
export class MembersService {
  constructor(
    private readonly database: Database,
    private readonly members: MembersRepository,
    private readonly organizations: OrganizationsService,
    private readonly audit: AuditService,
    private readonly webhookEvents: WebhookEventsService,
    private readonly apiKeys: ApiKeysService,
    private readonly invitations: InvitationsRepository,
    private readonly clock: Clock,
  ) {}

  async list(
    caller: ActingUserCaller,
    organizationId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<MemberDto>> {
    if (!(await this.members.roleOf(organizationId, caller.userId))) throw organizationNotFound();
    const rows = await this.members.findPage(organizationId, limit, startingAfter);
    return toPage(rows, limit, toMemberResponse);
  }

  /**
   * 404 for a caller who is not a member, before any lock: lockAll takes every membership row of
   * the organization FOR UPDATE, which anyone knowing its id could otherwise make its members'
   * changes wait on (found by review). The check under the lock stays: it is the one that holds.
   */
  private async assertMemberBeforeLocking(
    caller: ActingUserCaller,
    organizationId: string,
  ): Promise<void> {
    if (!(await this.members.roleOf(organizationId, caller.userId))) throw organizationNotFound();
  }

  async changeRole(
    caller: ActingUserCaller,
    organizationId: string,
    userId: string,
    role: Role,
  ): Promise<MemberDto> {
    await this.assertMemberBeforeLocking(caller, organizationId);
    const { member, changed, revoked } = await this.database.transaction(async (manager) => {
      await this.members.assertActorTokenHolds(manager, caller);
      const locked = await this.members.lockAll(manager, organizationId);
      const actorRole = locked.find((row) => row.user_id === caller.userId)?.role;
      if (!actorRole) throw organizationNotFound();
      const target = locked.find((row) => row.user_id === userId);
      if (!target) throw memberNotFound();
      assertManager(actorRole);
      if (target.role === role) {
        return {
          member: (await this.members.findMember(manager, organizationId, userId))!,
          changed: false,
          revoked: undefined,
        };
      }
      if (target.role === 'owner' || role === 'owner') assertOwner(actorRole);
      if (target.role === 'owner' && ownerCount(locked) === 1) throw lastOwner();
      await this.members.updateRole(manager, organizationId, userId, role);
      await this.audit.record(manager, caller, {
        organizationId,
        action: 'member.role_changed',
        target: { type: 'user', id: userId },
        details: { from: target.role, to: role },
      });
      // Invitations they may no longer send: all of a member's, an owner's to owner.
      if (role === 'member' || target.role === 'owner') {
        await this.revokeInvitationsSentBy(manager, caller, organizationId, userId, {
          roles: role === 'member' ? null : ['owner'],
          reason: 'member_demoted',
        });
      }
      // A member's access token has no admin scope: neither have their keys any more.
      const revoked =
        role === 'member'
          ? await this.apiKeys.revokeMadeBy(manager, caller, organizationId, userId, {
              adminOnly: true,
              reason: 'member_demoted',
            })
          : undefined;
      return {
        member: (await this.members.findMember(manager, organizationId, userId))!,
        changed: true,
        revoked,
      };
    });
    if (changed) await this.organizations.forgetMemberships(userId);
    if (revoked) await this.apiKeys.announceRevoked(revoked);
    return toMemberResponse(member);
  }

  /**
   * Removes a member; any member may remove themself (leave), except the last owner. The keys
   * the member made are revoked with the membership unless the remover (not the member leaving)
   * keeps them.
   */
  async remove(
    caller: ActingUserCaller,
    organizationId: string,
    userId: string,
    options: { keepApiKeys: boolean } = { keepApiKeys: false },
  ): Promise<void> {
    await this.assertMemberBeforeLocking(caller, organizationId);
    const revoked = await this.database.transaction(
      async (manager): Promise<RevokedKeys | undefined> => {
        await this.members.assertActorTokenHolds(manager, caller);
        const locked = await this.members.lockAll(manager, organizationId);
        const actorRole = locked.find((row) => row.user_id === caller.userId)?.role;
        if (!actorRole) throw organizationNotFound();
        const target = locked.find((row) => row.user_id === userId);
        if (!target) throw memberNotFound();
        const leaving = userId === caller.userId;
        if (!leaving) {
          assertManager(actorRole);
          if (target.role === 'owner') assertOwner(actorRole);
        }
        if (target.role === 'owner' && ownerCount(locked) === 1) throw lastOwner();
        await this.members.remove(manager, organizationId, userId);
        await this.audit.record(manager, caller, {
          organizationId,
          action: 'member.removed',
          target: { type: 'user', id: userId },
          details: { role: target.role, left: leaving },
        });
        await this.webhookEvents.emit(manager, organizationId, 'member.removed', {
          user_id: userId,
          role: target.role,
          left: leaving,
        });
        await this.revokeInvitationsSentBy(manager, caller, organizationId, userId, {
          roles: null,
          reason: 'member_removed',
        });
        // A member who leaves keeps nothing: keeping keys is the remaining managers' decision.
        if (options.keepApiKeys && !leaving) return undefined;
        return this.apiKeys.revokeMadeBy(manager, caller, organizationId, userId, {
          adminOnly: false,
          reason: 'member_removed',
        });
      },
    );
    await this.organizations.forgetMemberships(userId);
    if (revoked) await this.apiKeys.announceRevoked(revoked);
  }

  /**
   * In a removal's or demotion's transaction: the pending invitations the member sent that
   * their new standing could not send, each with its `invitation.revoked` audit event. Left
   * pending, a removed owner's invitation to an address of theirs made them owner again.
   */
  private async revokeInvitationsSentBy(
    manager: EntityManager,
    caller: ActingUserCaller,
    organizationId: string,
    userId: string,
    options: { roles: readonly Role[] | null; reason: 'member_removed' | 'member_demoted' },
  ): Promise<void> {
    const revoked = await this.invitations.revokeSentBy(
      manager,
      organizationId,
      userId,
      options.roles,
      this.clock.now(),
    );
    for (const invitation of revoked) {
      await this.audit.record(manager, caller, {
        organizationId,
        action: 'invitation.revoked',
        target: { type: 'invitation', id: invitation.id },
        details: { email: invitation.email, role: invitation.role, reason: options.reason },
      });
    }
  }
}

function ownerCount(rows: Array<{ role: Role }>): number {
  return rows.filter((row) => row.role === 'owner').length;
}
