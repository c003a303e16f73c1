import { Controller, Get, Param, Query, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { ServerResponse } from 'node:http';
import { Public } from '../common/auth/auth.decorators';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { ListQueryDto } from '../common/pagination/pagination';
import { ChangelogEntryDto, VocabularyVersionDto } from './dto/vocabulary.dto';
import { VocabulariesService } from './vocabularies.service';

/**
 * Public, static data: each answer was serialized at start-up and goes out as bytes with a strong
 * ETag (304 on If-None-Match). `@Res()` only, never `@Req()`: a handler that takes the request
 * counts as reading a body (BodilessRouteGuard), and these take none.
 */
@ApiTags('vocabularies')
@Public()
@Controller('v1/vocabularies/emotions')
export class VocabulariesController {
  constructor(private readonly vocabularies: VocabulariesService) {}

  @Get('changelog')
  @ApiOperation({ summary: 'Every published emotion vocabulary version, newest first' })
  @ApiPage(ChangelogEntryDto)
  @ApiErrors(400, [404, 'starting_after names no published version'])
  changelog(@Query() query: ListQueryDto, @Res() response: ServerResponse): void {
    this.vocabularies.changelogJson(query.limit, query.starting_after).send(response);
  }

  @Get()
  @ApiOperation({ summary: 'The latest emotion vocabulary' })
  @ApiOkResponse({ type: VocabularyVersionDto })
  latest(@Res() response: ServerResponse): void {
    this.vocabularies.latestJson().send(response);
  }

  @Get(':version')
  @ApiOperation({ summary: 'One published emotion vocabulary version' })
  @ApiOkResponse({ type: VocabularyVersionDto })
  @ApiErrors([404, 'No published version has this number'])
  get(@Param('version') version: string, @Res() response: ServerResponse): void {
    this.vocabularies.getJson(version).send(response);
  }
}
