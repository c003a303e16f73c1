import { Controller, Delete, Get, HttpCode, Param, Query } from '@nestjs/common';
import { ApiNoContentResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { Page } from '../common/pagination/pagination';
import {
  MemoryDto,
  MemoryListQueryDto,
  MemoryParamsDto,
  MemorySearchQueryDto,
  ScoredMemoryDto,
} from './dto/memory.dto';
import { UserIdParamDto } from '../end-users/dto/user-id';
import { MemoriesService } from './memories.service';

@ApiTags('end-users')
@Controller('v1/end-users/:user_id/memories')
export class MemoriesController {
  constructor(private readonly memories: MemoriesService) {}

  @Get()
  @Scopes('read')
  @ApiOperation({ summary: "The end user's memories, newest first (optionally one personality's)" })
  @ApiPage(MemoryDto)
  @ApiErrors(400, 404)
  list(
    @Caller() caller: CallerContext,
    @Param() params: UserIdParamDto,
    @Query() query: MemoryListQueryDto,
  ): Promise<Page<MemoryDto>> {
    return this.memories.list(caller.organizationId, params.user_id, {
      personalityId: query.personality_id,
      startingAfter: query.starting_after,
      limit: query.limit,
    });
  }

  @Get('search')
  @Scopes('read')
  @ApiOperation({
    summary:
      "The end user's memories holding words of `q`, most relevant first (full-text search in each personality's language)",
  })
  @ApiPage(ScoredMemoryDto)
  @ApiErrors(400, 404)
  search(
    @Caller() caller: CallerContext,
    @Param() params: UserIdParamDto,
    @Query() query: MemorySearchQueryDto,
  ): Promise<Page<ScoredMemoryDto>> {
    return this.memories.search(caller.organizationId, params.user_id, {
      q: query.q,
      personalityId: query.personality_id,
      limit: query.limit,
    });
  }

  @Delete(':id')
  @HttpCode(204)
  @Scopes('read_write')
  @ApiOperation({
    summary:
      'Forgets a memory for good: never sent to the engine again, gone from the export and subject access',
  })
  @ApiNoContentResponse({ description: 'Forgotten' })
  @ApiErrors(400, 404)
  async forget(@Caller() caller: CallerContext, @Param() params: MemoryParamsDto): Promise<void> {
    await this.memories.forget(caller.organizationId, params.user_id, params.id);
  }
}
