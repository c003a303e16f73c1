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
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import type { Response } from 'express';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { Page } from '../common/pagination/pagination';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';
import { FactContentDto, FactDto, FactListQueryDto, FactParamsDto } from './dto/fact.dto';
import { UserIdParamDto } from '../end-users/dto/user-id';
import { FactsService } from './facts.service';

const UNDER_DELETION: [number, string] = [
  409,
  'The end user is under deletion (`end_user_under_deletion`), or already holds this content (`conflict`)',
];

@ApiTags('end-users')
@Controller('v1/end-users/:user_id/facts')
export class FactsController {
  constructor(private readonly facts: FactsService) {}

  @Get()
  @Scopes('read')
  @ApiOperation({
    summary: 'Durable facts about the end user, shared by all personalities; newest first',
  })
  @ApiPage(FactDto)
  @ApiErrors(400, 404)
  list(
    @Caller() caller: CallerContext,
    @Param() params: UserIdParamDto,
    @Query() query: FactListQueryDto,
  ): Promise<Page<FactDto>> {
    return this.facts.list(caller.organizationId, params.user_id, {
      limit: query.limit,
      startingAfter: query.starting_after,
    });
  }

  @Post()
  @AcceptsIdempotencyKey()
  @Scopes('read_write')
  @ApiOperation({
    summary:
      'Adds a fact; one the end user already holds (case and white space aside) is answered as it is',
  })
  @ApiCreatedResponse({ type: FactDto, description: 'A new fact' })
  @ApiOkResponse({ type: FactDto, description: 'The end user already held this fact' })
  @ApiErrors(400, 404, [
    409,
    'At MEMORY_FACTS_LIMIT (`facts_limit_reached`), or under deletion (`end_user_under_deletion`)',
  ])
  async create(
    @Caller() caller: CallerContext,
    @Param() params: UserIdParamDto,
    @Body() body: FactContentDto,
    @Res({ passthrough: true }) response: Response,
  ): Promise<FactDto> {
    const { created, fact } = await this.facts.create(
      caller.organizationId,
      params.user_id,
      body.content,
    );
    response.status(created ? 201 : 200);
    return fact;
  }

  @Patch(':id')
  @Scopes('read_write')
  @ApiOperation({ summary: "Replaces a fact's content" })
  @ApiOkResponse({ type: FactDto })
  @ApiErrors(400, 404, UNDER_DELETION)
  update(
    @Caller() caller: CallerContext,
    @Param() params: FactParamsDto,
    @Body() body: FactContentDto,
  ): Promise<FactDto> {
    return this.facts.update(caller.organizationId, params.user_id, params.id, body.content);
  }

  @Delete(':id')
  @HttpCode(204)
  @Scopes('read_write')
  @ApiOperation({ summary: 'Deletes a fact' })
  @ApiNoContentResponse({ description: 'Deleted' })
  @ApiErrors(400, 404)
  async delete(@Caller() caller: CallerContext, @Param() params: FactParamsDto): Promise<void> {
    await this.facts.delete(caller.organizationId, params.user_id, params.id);
  }
}
