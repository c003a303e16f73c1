import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import {
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import { UserOnly } from '../common/auth/auth.decorators';
import { ActingUser, type ActingUserCaller } from '../common/auth/caller';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { IdListQueryDto, Page } from '../common/pagination/pagination';
import { AcceptInvitationDto, CreateInvitationDto, InvitationDto } from './dto/invitation.dto';
import { OrganizationDto } from './dto/organization.dto';
import { invitationIdPipe, organizationIdPipe } from './dto/path-params';
import { InvitationsService } from './invitations.service';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';

const FORBIDDEN_ROLE: [number, string] = [
  403,
  'An API key was used (`user_token_required`), or the role does not allow it (`insufficient_role`)',
];

@ApiTags('members')
@UserOnly()
@Controller('v1')
export class InvitationsController {
  constructor(private readonly invitations: InvitationsService) {}

  @Post('organizations/:id/invitations')
  @AcceptsIdempotencyKey()
  @HttpCode(201)
  @ApiOperation({
    summary:
      'Invites an e-mail address (owners and admins); an open invitation of the same address is replaced',
    description:
      'The inviter must have verified their e-mail address. Only an owner invites as `owner`, or replaces an open `owner` invitation. At most INVITATIONS_PER_DAY (default 50) invitations per UTC day per organization, and as many per inviting user across all their organizations, a replacement included.',
  })
  @ApiCreatedResponse({ type: InvitationDto })
  @ApiErrors(
    400,
    [
      403,
      'An API key was used (`user_token_required`), the role does not allow it (`insufficient_role`), or the inviter has not verified their e-mail address (`email_not_verified`)',
    ],
    404,
    [409, 'The address is a member already (`already_a_member`)'],
    [
      429,
      'The organization, or the inviting user across their organizations, sent INVITATIONS_PER_DAY invitations today (`rate_limited`, with Retry-After)',
    ],
  )
  create(
    @ActingUser() caller: ActingUserCaller,
    @Param('id', organizationIdPipe) organizationId: string,
    @Body() body: CreateInvitationDto,
  ): Promise<InvitationDto> {
    return this.invitations.create(caller, organizationId, body);
  }

  @Get('organizations/:id/invitations')
  @ApiOperation({ summary: "The organization's invitations, newest first (owners and admins)" })
  @ApiPage(InvitationDto)
  @ApiErrors(400, FORBIDDEN_ROLE, 404)
  list(
    @ActingUser() caller: ActingUserCaller,
    @Param('id', organizationIdPipe) organizationId: string,
    @Query() query: IdListQueryDto,
  ): Promise<Page<InvitationDto>> {
    return this.invitations.list(caller, organizationId, query.limit, query.starting_after);
  }

  @Delete('organizations/:id/invitations/:invitation_id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Revokes an invitation not yet accepted; its link stops working' })
  @ApiNoContentResponse()
  @ApiErrors(FORBIDDEN_ROLE, 404)
  async revoke(
    @ActingUser() caller: ActingUserCaller,
    @Param('id', organizationIdPipe) organizationId: string,
    @Param('invitation_id', invitationIdPipe) id: string,
  ): Promise<void> {
    await this.invitations.revoke(caller, organizationId, id);
  }

  @Post('invitations/accept')
  @AcceptsIdempotencyKey()
  @HttpCode(200)
  @ApiOperation({
    summary:
      "Joins the invitation's organization as the authenticated user (sign up or log in first)",
  })
  @ApiOkResponse({ type: OrganizationDto })
  @ApiErrors(
    [400, 'Bad input, or the token is unknown, expired, revoked or used (`invalid_invitation`)'],
    [
      403,
      'An API key was used (`user_token_required`), or the invitation is for another address (`invitation_email_mismatch`)',
    ],
  )
  accept(
    @ActingUser() caller: ActingUserCaller,
    @Body() body: AcceptInvitationDto,
  ): Promise<OrganizationDto> {
    return this.invitations.accept(caller, body.token);
  }
}
