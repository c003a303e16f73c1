import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Public } from '../common/auth/auth.decorators';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { ListQueryDto, Page } from '../common/pagination/pagination';
import { ChangelogEntryDto, VocabularyVersionDto } from './dto/vocabulary.dto';
import { VocabulariesService } from './vocabularies.service';

@ApiTags('vocabularies')
@Public()
@Controller('v1/vocabularies/emotions')
export class VocabulariesController {
  constructor(private readonly vocabularies: VocabulariesService) {}

  @Get('changelog')
  @ApiOperation({ summary: 'Every published emotion vocabulary version, newest first' })
  @ApiPage(ChangelogEntryDto)
  @ApiErrors(400, [404, 'starting_after names no published version'])
  changelog(@Query() query: ListQueryDto): Page<ChangelogEntryDto> {
    return this.vocabularies.listChangelog(query.limit, query.starting_after);
  }

  @Get()
  @ApiOperation({ summary: 'The latest emotion vocabulary' })
  @ApiOkResponse({ type: VocabularyVersionDto })
  latest(): VocabularyVersionDto {
    return this.vocabularies.latest();
  }

  @Get(':version')
  @ApiOperation({ summary: 'One published emotion vocabulary version' })
  @ApiOkResponse({ type: VocabularyVersionDto })
  @ApiErrors([404, 'No published version has this number'])
  get(@Param('version') version: string): VocabularyVersionDto {
    return this.vocabularies.get(version);
  }
}
