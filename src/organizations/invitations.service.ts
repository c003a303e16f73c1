import { randomBytes } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { AuditService } from '../audit/audit.service';
import { WebhookEventsService } from '../webhooks/webhook-events.service';
import type { ActingUserCaller } from '../common/auth/caller';
import { sha256 } from '../common/crypto/sha256';
import { AppError } from '../common/errors/app-error';
import { type Page, toPage } from '../common/pagination/pagination';
import { Clock } from '../common/time/clock';
import { teamsConfig } from '../config/teams.config';
import { UsersService } from '../users/users.service';
import { Database } from '../database/database';
import { CreateInvitationDto, InvitationDto, toInvitationResponse } from './dto/invitation.dto';
import type { OrganizationDto } from './dto/organization.dto';
import { InvitationMailer } from './invitation-mailer.service';
import { InvitationsRepository } from './invitations.repository';
import { MembersRepository } from './members.repository';
import { OrganizationsService, toOrganizationView } from './organizations.service';
import { assertManager, assertOwner, organizationNotFound } from './team-rules';
import { secondsToNextUtcDay, utcDay } from '../common/time/utc-day';

/** 256 random bits, base64url: what the e-mail's link carries. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** 429 until the next UTC day, when the organization's and the user's counts start over. */
function dailyCapReached(who: 'organization' | 'user', cap: number, nowMs: number): AppError {
  const seconds = secondsToNextUtcDay(nowMs);
  const sender =
    who === 'organization' ? 'An organization sends' : 'You send, across all your organizations,';
  return new AppError(
    'rate_limited',
    `${sender} at most ${cap} invitations per UTC day; retry in ${seconds} s`,
    { headers: { 'Retry-After': String(seconds) } },
  );
}

const invalidInvitation = () =>
  new AppError('invalid_invitation', 'The invitation is unknown, expired, revoked or already used');

/**
 * Invitations by e-mail. The token is 256 random bits, stored only as its SHA-256, used once.
 * Inviting an address that already has an open invitation replaces it (new token, role and
 * expiry; the earlier link stops working), so "send it again" needs no separate endpoint.
 */
@Injectable()
export class InvitationsService {
  constructor(
    private readonly database: Database,
    private readonly invitations: InvitationsRepository,
    private readonly members: MembersRepository,
    private readonly organizations: OrganizationsService,
    private readonly users: UsersService,
    private readonly audit: AuditService,
    private readonly webhookEvents: WebhookEventsService,
    private readonly mailer: InvitationMailer,
    @Inject(teamsConfig.KEY) private readonly teams: ConfigType<typeof teamsConfig>,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(InvitationsService.name);
  }

  async create(
    caller: ActingUserCaller,
    organizationId: string,
    dto: CreateInvitationDto,
  ): Promise<InvitationDto> {
    const { invitationTtlSeconds, invitationsPerDay } = this.teams;
    const email = dto.email.trim();
    const token = randomBytes(32).toString('base64url');
    const now = this.clock.nowMs();
    const { invitation, mail } = await this.database.transaction(async (manager) => {
      await this.members.assertActorTokenHolds(manager, caller);
      const actor = await this.members.findMember(manager, organizationId, caller.userId);
      if (!actor) throw organizationNotFound();
      // The role's refusal first, whether verified or not.
      assertManager(actor.role);
      if (dto.role === 'owner') assertOwner(actor.role);
      const context = await this.invitations.mailContext(manager, organizationId, caller.userId);
      if (!context) throw organizationNotFound();
      if (!context.inviter_verified) {
        throw new AppError(
          'email_not_verified',
          'Verify your e-mail address before inviting: use the link mailed at sign-up, or ask for another with POST /v1/auth/resend-verification',
        );
      }
      const emailKey = await this.invitations.emailKey(manager, email);
      if (await this.members.hasMemberWithEmail(manager, organizationId, emailKey)) {
        throw new AppError(
          'already_a_member',
          'A member of the organization already has this e-mail address',
        );
      }
      const row = await this.invitations.upsertOpen(manager, {
        organizationId,
        email,
        emailKey,
        role: dto.role,
        tokenHash: sha256(token),
        invitedByUserId: caller.userId,
        now: new Date(now),
        expiresAt: new Date(now + invitationTtlSeconds * 1000),
        byOwner: actor.role === 'owner',
      });
      if (!row) {
        throw new AppError(
          'insufficient_role',
          'This address has an open invitation for the owner role: only an owner replaces it',
        );
      }
      // Every mail sent counts, a replacement's too: the cap is on mails, not on rows. It holds
      // per organization and per inviting user (contract §29), so ten organizations of one
      // account do not send ten times the mails. A refusal rolls both counts back. Every
      // invitation locks the organization's row, then the user's: one order, no deadlock.
      const today = utcDay(new Date(now));
      if (!(await this.invitations.countSent(manager, organizationId, today, invitationsPerDay))) {
        throw dailyCapReached('organization', invitationsPerDay, now);
      }
      if (!(await this.invitations.countSentBy(manager, caller.userId, today, invitationsPerDay))) {
        throw dailyCapReached('user', invitationsPerDay, now);
      }
      await this.audit.record(manager, caller, {
        organizationId,
        action: 'member.invited',
        target: { type: 'invitation', id: row.id },
        details: { email, role: dto.role, replaced_earlier_invitation: row.replaced },
      });
      return {
        invitation: row,
        mail: { organization: context.organization, inviterEmail: context.inviter_email },
      };
    });
    try {
      await this.mailer.send(
        { to: email, role: dto.role, expiresAt: invitation.expires_at, ...mail },
        token,
      );
    } catch (error) {
      // The invitation stands; inviting the address again sends a new link.
      this.logger.error(
        { err: error, invitationId: invitation.id },
        'invitation mail could not be sent',
      );
    }
    return toInvitationResponse(invitation);
  }

  async list(
    caller: ActingUserCaller,
    organizationId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<InvitationDto>> {
    const role = await this.members.roleOf(organizationId, caller.userId);
    if (!role) throw organizationNotFound();
    assertManager(role);
    const rows = await this.invitations.findPage(
      organizationId,
      this.clock.now(),
      limit,
      startingAfter,
    );
    return toPage(rows, limit, toInvitationResponse);
  }

  async revoke(caller: ActingUserCaller, organizationId: string, id: string): Promise<void> {
    await this.database.transaction(async (manager) => {
      await this.members.assertActorTokenHolds(manager, caller);
      const actor = await this.members.findMember(manager, organizationId, caller.userId);
      if (!actor) throw organizationNotFound();
      assertManager(actor.role);
      const now = this.clock.now();
      const revoked = await this.invitations.revoke(manager, organizationId, id, now);
      if (!revoked) throw AppError.notFound('Invitation');
      // A pending owner invitation is an owner's to revoke; an expired one makes no one owner.
      if (revoked.role === 'owner' && revoked.expires_at > now) assertOwner(actor.role);
      await this.audit.record(manager, caller, {
        organizationId,
        action: 'invitation.revoked',
        target: { type: 'invitation', id },
        details: { email: revoked.email, role: revoked.role },
      });
    });
  }

  /**
   * Joins the invitation's organization as the calling user. The invitation row is locked for
   * the transaction, so of two concurrent acceptances one joins and the other finds it used.
   */
  async accept(caller: ActingUserCaller, token: string): Promise<OrganizationDto> {
    if (!TOKEN_PATTERN.test(token)) throw invalidInvitation();
    const userId = caller.userId;
    const user = await this.users.findById(userId);
    if (!user) throw AppError.unauthenticated();
    const view = await this.database.transaction(async (manager) => {
      await this.members.assertActorTokenHolds(manager, caller);
      const now = this.clock.now();
      const invitation = await this.invitations.lockByTokenHash(manager, sha256(token), now);
      if (!invitation || invitation.status !== 'pending') throw invalidInvitation();
      if ((await this.invitations.emailKey(manager, user.email)) !== invitation.email_key) {
        throw new AppError(
          'invitation_email_mismatch',
          'This invitation was sent to another e-mail address: log in as that address to accept it',
        );
      }
      // Its sender removed, or demoted below the role it grants: no longer theirs to give.
      if (!(await this.invitations.senderMayStillSend(manager, invitation.id))) {
        throw invalidInvitation();
      }
      const joined = await this.members.insertIfAbsent(
        manager,
        invitation.organization_id,
        userId,
        invitation.role,
      );
      await this.invitations.markAccepted(manager, invitation.id, userId, now);
      if (joined) {
        await this.audit.record(manager, caller, {
          organizationId: invitation.organization_id,
          action: 'member.joined',
          target: { type: 'user', id: userId },
          details: { role: invitation.role, invitation_id: invitation.id },
        });
        await this.webhookEvents.emit(manager, invitation.organization_id, 'member.added', {
          user_id: userId,
          role: invitation.role,
          invitation_id: invitation.id,
        });
      }
      return (await this.members.organizationView(manager, invitation.organization_id, userId))!;
    });
    await this.organizations.forgetMemberships(userId);
    return toOrganizationView(view);
  }
}
