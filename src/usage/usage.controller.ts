import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { Page } from '../common/pagination/pagination';
import {
  ActiveRelationshipItemDto,
  ActiveRelationshipsDto,
  BreakdownQueryDto,
  MonthItemsQueryDto,
  MonthQueryDto,
  TokenUsageDto,
  UsageBreakdownDto,
} from './dto/usage.dto';
import { UsageService } from './usage.service';

@ApiTags('usage')
@Scopes('read')
@Controller('v1/usage')
export class UsageController {
  constructor(private readonly usage: UsageService) {}

  @Get('active-relationships')
  @ApiOperation({ summary: 'Distinct active (end user, personality) pairs in a UTC month' })
  @ApiOkResponse({ type: ActiveRelationshipsDto })
  @ApiErrors(400)
  count(
    @Caller() caller: CallerContext,
    @Query() query: MonthQueryDto,
  ): Promise<ActiveRelationshipsDto> {
    return this.usage.activeRelationships(caller.organizationId, query.month);
  }

  @Get('active-relationships/items')
  @ApiOperation({
    summary: 'The pairs counted in a month, for auditing the count (erased end users excluded)',
  })
  @ApiPage(ActiveRelationshipItemDto)
  @ApiErrors(400)
  items(
    @Caller() caller: CallerContext,
    @Query() query: MonthItemsQueryDto,
  ): Promise<Page<ActiveRelationshipItemDto>> {
    return this.usage.items(caller.organizationId, {
      month: query.month,
      limit: query.limit,
      startingAfter: query.starting_after,
    });
  }

  @Get('tokens')
  @ApiOperation({
    summary:
      "The model provider's reported token counts in a UTC month (replies of the openai engine)",
  })
  @ApiOkResponse({ type: TokenUsageDto })
  @ApiErrors(400)
  tokens(@Caller() caller: CallerContext, @Query() query: MonthQueryDto): Promise<TokenUsageDto> {
    return this.usage.tokens(caller.organizationId, query.month);
  }

  @Get('breakdown')
  @ApiOperation({
    summary:
      "The month's provider tokens by end user, personality, day or model (rollups kept by every reply)",
  })
  @ApiOkResponse({ type: UsageBreakdownDto })
  @ApiErrors(400)
  breakdown(
    @Caller() caller: CallerContext,
    @Query() query: BreakdownQueryDto,
  ): Promise<UsageBreakdownDto> {
    return this.usage.breakdown(caller.organizationId, {
      month: query.month,
      groupBy: query.group_by,
      limit: query.limit,
      startingAfter: query.starting_after,
    });
  }
}
