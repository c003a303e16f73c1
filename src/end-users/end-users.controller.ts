import {
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  Param,
  Patch,
  Post,
  Query,
  Res,
} from '@nestjs/common';
import {
  ApiAcceptedResponse,
  ApiCreatedResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import type { Response } from 'express';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { Page } from '../common/pagination/pagination';
import {
  CreateEndUserDto,
  EndUserDeletionDto,
  EndUserDto,
  EndUserListQueryDto,
  toEndUserResponse,
  UpdateEndUserDto,
} from './dto/end-user.dto';
import { UserIdParamDto } from './dto/user-id';
import { EndUsersService } from './end-users.service';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';

const UNDER_DELETION: [number, string] = [
  409,
  'The user_id is under deletion (`end_user_under_deletion`); `erasure_expected_at` says until when',
];

@ApiTags('end-users')
@Controller('v1/end-users')
export class EndUsersController {
  constructor(private readonly endUsers: EndUsersService) {}

  @Post()
  @AcceptsIdempotencyKey()
  @Scopes('read_write')
  @ApiOperation({
    summary: 'Creates the end user, or returns the existing one (metadata then ignored)',
  })
  @ApiCreatedResponse({ type: EndUserDto, description: 'A new end user' })
  @ApiOkResponse({ type: EndUserDto, description: 'The end user already existed' })
  @ApiErrors(400, UNDER_DELETION)
  async create(
    @Caller() caller: CallerContext,
    @Body() body: CreateEndUserDto,
    @Res({ passthrough: true }) response: Response,
  ): Promise<EndUserDto> {
    const { created, row } = await this.endUsers.ensure(
      caller.organizationId,
      body.user_id,
      body.metadata,
    );
    response.status(created ? 201 : 200);
    return toEndUserResponse(row);
  }

  @Get()
  @Scopes('read')
  @ApiOperation({ summary: "The organization's end users, ordered by user_id (the cursor)" })
  @ApiPage(EndUserDto)
  @ApiErrors(400)
  list(
    @Caller() caller: CallerContext,
    @Query() query: EndUserListQueryDto,
  ): Promise<Page<EndUserDto>> {
    return this.endUsers.list(caller.organizationId, query.limit, query.starting_after);
  }

  @Get(':user_id')
  @Scopes('read')
  @ApiOperation({ summary: 'One end user (also while under deletion)' })
  @ApiOkResponse({ type: EndUserDto })
  @ApiErrors(400, 404)
  get(@Caller() caller: CallerContext, @Param() params: UserIdParamDto): Promise<EndUserDto> {
    return this.endUsers.get(caller.organizationId, params.user_id);
  }

  @Patch(':user_id')
  @Scopes('read_write')
  @ApiOperation({ summary: "Replaces the end user's metadata" })
  @ApiOkResponse({ type: EndUserDto })
  @ApiErrors(400, 404, UNDER_DELETION)
  update(
    @Caller() caller: CallerContext,
    @Param() params: UserIdParamDto,
    @Body() body: UpdateEndUserDto,
  ): Promise<EndUserDto> {
    return this.endUsers.updateMetadata(caller.organizationId, params.user_id, body.metadata);
  }

  @Delete(':user_id')
  @HttpCode(202)
  @Scopes('read_write')
  @ApiOperation({
    summary:
      'Starts the erasure of the end user and all their data; it completes after the grace period',
  })
  @ApiAcceptedResponse({ type: EndUserDeletionDto })
  @ApiErrors(400, 404)
  remove(
    @Caller() caller: CallerContext,
    @Param() params: UserIdParamDto,
  ): Promise<EndUserDeletionDto> {
    return this.endUsers.scheduleErasure(caller, params.user_id);
  }
}
