import { Body, Controller, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { UserOnly } from '../common/auth/auth.decorators';
import { ActingUser, type ActingUserCaller } from '../common/auth/caller';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { IdListQueryDto, Page } from '../common/pagination/pagination';
import {
  CreateOrganizationDto,
  OrganizationDto,
  UpdateOrganizationDto,
} from './dto/organization.dto';
import { organizationIdPipe } from './dto/path-params';
import { OrganizationsService } from './organizations.service';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';

@ApiTags('organizations')
@UserOnly()
@Controller('v1/organizations')
export class OrganizationsController {
  constructor(private readonly organizations: OrganizationsService) {}

  @Get()
  @ApiOperation({ summary: "The authenticated user's organizations, with the user's role in each" })
  @ApiPage(OrganizationDto)
  @ApiErrors(400)
  list(
    @ActingUser() caller: ActingUserCaller,
    @Query() query: IdListQueryDto,
  ): Promise<Page<OrganizationDto>> {
    return this.organizations.listForUser(caller.userId, query.limit, query.starting_after);
  }

  @Post()
  @AcceptsIdempotencyKey()
  @HttpCode(201)
  @ApiOperation({
    summary: 'Creates an organization owned by the authenticated user',
    description:
      'A user creates at most ORGANIZATIONS_PER_USER (default 10) organizations, the one made at sign-up included.',
  })
  @ApiCreatedResponse({ type: OrganizationDto })
  @ApiErrors(400, [
    409,
    'The user has created ORGANIZATIONS_PER_USER organizations (`organization_limit`)',
  ])
  create(
    @ActingUser() caller: ActingUserCaller,
    @Body() body: CreateOrganizationDto,
  ): Promise<OrganizationDto> {
    return this.organizations.create(caller, body.name);
  }

  @Patch(':id')
  @ApiOperation({
    summary:
      "Sets how long the organization's memories are kept (owners and admins; members 403 `insufficient_scope`)",
  })
  @ApiOkResponse({ type: OrganizationDto })
  @ApiErrors(400, [404, 'Not an organization of yours'])
  update(
    @ActingUser() caller: ActingUserCaller,
    @Param('id', organizationIdPipe) organizationId: string,
    @Body() body: UpdateOrganizationDto,
  ): Promise<OrganizationDto> {
    return this.organizations.setMemoryRetention(
      caller,
      organizationId,
      body.memory_retention_days,
    );
  }
}
