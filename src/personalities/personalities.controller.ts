import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import {
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { uuidOr404 } from '../common/validation/uuid-or-404';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { ListQueryDto, Page } from '../common/pagination/pagination';
import { FromCatalogDto } from './dto/from-catalog.dto';
import { CatalogEntryDto, PersonalityDto } from './dto/personality-response';
import { UpdatePersonalityDto } from './dto/update-personality.dto';
import { PersonalitiesService } from './personalities.service';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';

const personalityId = uuidOr404('Personality');

@ApiTags('personalities')
@Controller('v1/personalities')
export class PersonalitiesController {
  constructor(private readonly personalities: PersonalitiesService) {}

  @Get('catalog')
  @Scopes('read')
  @ApiOperation({ summary: 'The catalog of personalities to clone, ordered by slug' })
  @ApiPage(CatalogEntryDto)
  @ApiErrors(400)
  catalog(@Query() query: ListQueryDto): Promise<Page<CatalogEntryDto>> {
    return this.personalities.listCatalog(query.limit, query.starting_after);
  }

  @Post('from-catalog')
  @AcceptsIdempotencyKey()
  @HttpCode(201)
  @Scopes('read_write')
  @ApiOperation({
    summary: 'Clones a catalog entry into the organization: later catalog changes never reach it',
  })
  @ApiCreatedResponse({ type: PersonalityDto })
  @ApiErrors(400, [404, 'No catalog entry has this slug'])
  fromCatalog(
    @Caller() caller: CallerContext,
    @Body() body: FromCatalogDto,
  ): Promise<PersonalityDto> {
    return this.personalities.cloneFromCatalog(
      caller.organizationId,
      body.slug,
      body.language,
      body.tools,
    );
  }

  @Get()
  @Scopes('read')
  @ApiOperation({ summary: "The organization's personalities, oldest first" })
  @ApiPage(PersonalityDto)
  @ApiErrors(400)
  list(
    @Caller() caller: CallerContext,
    @Query() query: ListQueryDto,
  ): Promise<Page<PersonalityDto>> {
    return this.personalities.list(caller.organizationId, query.limit, query.starting_after);
  }

  @Get(':id')
  @Scopes('read')
  @ApiOperation({ summary: 'One personality of the organization' })
  @ApiOkResponse({ type: PersonalityDto })
  @ApiErrors(404)
  get(
    @Caller() caller: CallerContext,
    @Param('id', personalityId) id: string,
  ): Promise<PersonalityDto> {
    return this.personalities.get(caller.organizationId, id);
  }

  @Patch(':id')
  @Scopes('read_write')
  @ApiOperation({ summary: 'Changes the given fields of a personality' })
  @ApiOkResponse({ type: PersonalityDto })
  @ApiErrors(400, 404)
  update(
    @Caller() caller: CallerContext,
    @Param('id', personalityId) id: string,
    @Body() body: UpdatePersonalityDto,
  ): Promise<PersonalityDto> {
    return this.personalities.update(caller.organizationId, id, body);
  }

  @Delete(':id')
  @HttpCode(204)
  @Scopes('read_write')
  @ApiOperation({
    summary: 'Deletes a personality and its memories; months already counted stay counted',
  })
  @ApiNoContentResponse()
  @ApiErrors(404)
  async remove(
    @Caller() caller: CallerContext,
    @Param('id', personalityId) id: string,
  ): Promise<void> {
    await this.personalities.remove(caller, id);
  }
}
