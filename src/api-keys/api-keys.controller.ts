import {
  Body,
  Controller,
  Delete,
  Get,
  Header,
  HttpCode,
  Param,
  Patch,
  Post,
  Query,
} from '@nestjs/common';
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
import { IdListQueryDto, Page } from '../common/pagination/pagination';
import { ApiKeysService } from './api-keys.service';
import {
  ApiKeyDto,
  CreateApiKeyDto,
  CreatedApiKeyDto,
  DEFAULT_ROLL_OVERLAP_SECONDS,
  RollApiKeyDto,
  UpdateApiKeyDto,
} from './dto/api-key.dto';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';

const uuidPipe = uuidOr404('API key');

/** A creation or a roll makes a key, and counts it into the organization's day. */
const KEYS_A_DAY = [
  429,
  "Rate limited, or the caller's member made API_KEYS_PER_DAY keys in the organization this UTC day, created or rolled, by their access token or by their lines' keys (`rate_limited`, with Retry-After the seconds to the next UTC midnight)",
] as const;

@ApiTags('api-keys')
@Scopes('admin')
@Controller('v1/api-keys')
export class ApiKeysController {
  constructor(private readonly apiKeys: ApiKeysService) {}

  @Header('Cache-Control', 'no-store')
  @Post()
  @AcceptsIdempotencyKey()
  @HttpCode(201)
  @ApiOperation({ summary: 'Creates an API key; the full key is in this response only' })
  @ApiCreatedResponse({ type: CreatedApiKeyDto })
  @ApiErrors(400, [...KEYS_A_DAY])
  create(
    @Caller() caller: CallerContext,
    @Body() body: CreateApiKeyDto,
  ): Promise<CreatedApiKeyDto> {
    return this.apiKeys.create(caller, body);
  }

  @Get()
  @ApiOperation({ summary: "The organization's active API keys, without the keys themselves" })
  @ApiPage(ApiKeyDto)
  @ApiErrors(400)
  list(@Caller() caller: CallerContext, @Query() query: IdListQueryDto): Promise<Page<ApiKeyDto>> {
    return this.apiKeys.list(caller.organizationId, query.limit, query.starting_after);
  }

  @Patch(':id')
  @ApiOperation({
    summary:
      'Renames a key or sets its own bucket (`rate_limit`, null: none), on every instance from the next request on',
  })
  @ApiOkResponse({ type: ApiKeyDto })
  @ApiErrors(400, [404, 'No active key with this id'])
  update(
    @Caller() caller: CallerContext,
    @Param('id', uuidPipe) id: string,
    @Body() body: UpdateApiKeyDto,
  ): Promise<ApiKeyDto> {
    return this.apiKeys.update(caller, id, body);
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Revokes an API key; it is refused from the next request on' })
  @ApiNoContentResponse()
  @ApiErrors(404)
  async revoke(@Caller() caller: CallerContext, @Param('id', uuidPipe) id: string): Promise<void> {
    await this.apiKeys.revoke(caller, id);
  }

  @Post(':id/roll')
  @AcceptsIdempotencyKey()
  @HttpCode(201)
  @Header('Cache-Control', 'no-store')
  @ApiOperation({
    summary:
      'Issues a new key with the same name and scopes (shown once); the old one works until expires_in_seconds from now',
  })
  @ApiCreatedResponse({ type: CreatedApiKeyDto })
  @ApiErrors(400, [404, 'No active key with this id'], [...KEYS_A_DAY])
  roll(
    @Caller() caller: CallerContext,
    @Param('id', uuidPipe) id: string,
    @Body() body: RollApiKeyDto,
  ): Promise<CreatedApiKeyDto> {
    return this.apiKeys.roll(caller, id, body.expires_in_seconds ?? DEFAULT_ROLL_OVERLAP_SECONDS);
  }
}
