import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Query } from '@nestjs/common';
import { ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { UserOnly } from '../common/auth/auth.decorators';
import { ActingUser, type ActingUserCaller } from '../common/auth/caller';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { IdListQueryDto, Page } from '../common/pagination/pagination';
import { MemberDto, RemoveMemberQueryDto, UpdateMemberDto } from './dto/member.dto';
import { memberIdPipe, organizationIdPipe } from './dto/path-params';
import { MembersService } from './members.service';

const FORBIDDEN_ROLE: [number, string] = [
  403,
  'An API key was used (`user_token_required`), or the role does not allow it (`insufficient_role`)',
];

@ApiTags('members')
@UserOnly()
@Controller('v1/organizations/:id/members')
export class MembersController {
  constructor(private readonly members: MembersService) {}

  @Get()
  @ApiOperation({ summary: "The organization's members (any member may list them)" })
  @ApiPage(MemberDto)
  @ApiErrors(400, [404, 'Not an organization of yours'])
  list(
    @ActingUser() caller: ActingUserCaller,
    @Param('id', organizationIdPipe) organizationId: string,
    @Query() query: IdListQueryDto,
  ): Promise<Page<MemberDto>> {
    return this.members.list(caller, organizationId, query.limit, query.starting_after);
  }

  @Patch(':user_id')
  @ApiOperation({
    summary: "Changes a member's role (owners and admins; only owners touch `owner`)",
    description:
      'Demoting an owner or admin to `member` revokes the API keys they made that hold the `admin` scope (and the admin keys those made); their other keys stay.',
  })
  @ApiOkResponse({ type: MemberDto })
  @ApiErrors(400, FORBIDDEN_ROLE, 404, [409, 'The last owner cannot be demoted (`last_owner`)'])
  changeRole(
    @ActingUser() caller: ActingUserCaller,
    @Param('id', organizationIdPipe) organizationId: string,
    @Param('user_id', memberIdPipe) userId: string,
    @Body() body: UpdateMemberDto,
  ): Promise<MemberDto> {
    return this.members.changeRole(caller, organizationId, userId, body.role);
  }

  @Delete(':user_id')
  @HttpCode(204)
  @ApiOperation({
    summary: 'Removes a member; a member may remove themself. Refused from the next request on',
    description:
      'The API keys the member made (and the keys those made) are revoked with the membership, each with an `api_key.revoked` audit event (`details.reason: "member_removed"`), unless the remover passes `?keep_api_keys=true` (not honoured for a member who leaves).',
  })
  @ApiNoContentResponse()
  @ApiErrors(400, FORBIDDEN_ROLE, 404, [409, 'The last owner cannot be removed (`last_owner`)'])
  async remove(
    @ActingUser() caller: ActingUserCaller,
    @Param('id', organizationIdPipe) organizationId: string,
    @Param('user_id', memberIdPipe) userId: string,
    @Query() query: RemoveMemberQueryDto,
  ): Promise<void> {
    await this.members.remove(caller, organizationId, userId, {
      keepApiKeys: query.keep_api_keys === 'true',
    });
  }
}
