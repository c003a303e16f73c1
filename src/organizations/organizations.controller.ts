import { Body, Controller, Get, HttpCode, Post, Query } from '@nestjs/common';
import { ApiCreatedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { UserOnly } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { DEFAULT_PAGE_SIZE, ListQueryDto, Page, toPage } from '../common/pagination/pagination';
import { CreateOrganizationDto, OrganizationDto } from './dto/organization.dto';
import { OrganizationsService } from './organizations.service';

@ApiTags('organizations')
@UserOnly()
@Controller('v1/organizations')
export class OrganizationsController {
  constructor(private readonly organizations: OrganizationsService) {}

  @Get()
  @ApiOperation({ summary: "The authenticated user's organizations, with the user's role in each" })
  @ApiPage(OrganizationDto)
  @ApiErrors(400)
  async list(
    @Caller() caller: CallerContext,
    @Query() query: ListQueryDto,
  ): Promise<Page<OrganizationDto>> {
    const limit = query.limit ?? DEFAULT_PAGE_SIZE;
    const rows = await this.organizations.listForUser(
      caller.userId!,
      limit + 1,
      query.starting_after,
    );
    return toPage(rows, limit, (row) => row);
  }

  @Post()
  @HttpCode(201)
  @ApiOperation({ summary: 'Creates an organization owned by the authenticated user' })
  @ApiCreatedResponse({ type: OrganizationDto })
  @ApiErrors(400)
  create(
    @Caller() caller: CallerContext,
    @Body() body: CreateOrganizationDto,
  ): Promise<OrganizationDto> {
    return this.organizations.create(caller.userId!, body.name);
  }
}
