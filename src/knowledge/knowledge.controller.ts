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
  UseInterceptors,
} from '@nestjs/common';
import { FileInterceptor } from '@nestjs/platform-express';
import {
  ApiBody,
  ApiConsumes,
  ApiCreatedResponse,
  ApiExtraModels,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
  getSchemaPath,
} from '@nestjs/swagger';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { ClientGone } from '../common/http/client-signal';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { IdListQueryDto, type Page } from '../common/pagination/pagination';
import { uuidOr404 } from '../common/validation/uuid-or-404';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';
import {
  CreateKnowledgeDto,
  CreateKnowledgeFormDto,
  KnowledgeDocumentDto,
  KnowledgeDocumentWithContentDto,
  KnowledgeSearchQueryDto,
  KnowledgeSearchResultDto,
  UpdateKnowledgeDto,
} from './dto/knowledge.dto';
import { ParsesJsonBodyAfterGuards } from '../common/http/json-body-after-guards.interceptor';
import {
  KNOWLEDGE_BODY_BYTES_PER_ACCOUNT,
  KnowledgeBodyInterceptor,
  KnowledgeBodyReadInterceptor,
} from './knowledge-bodies';
import { KnowledgeUploadInterceptor, UPLOAD_LIMITS } from './knowledge-upload.interceptor';
import { KNOWLEDGE_WRITES_WAITING } from './knowledge-write-turns';
import { KnowledgeService } from './knowledge.service';

const documentId = uuidOr404('Document');

/** `POST /v1/knowledge`, which also takes multipart/form-data (app.setup.ts). */
export const KNOWLEDGE_UPLOAD_ROUTE = 'POST /v1/knowledge';

/** The JSON bodies of knowledge routes: 1 MiB of text, which JSON escaping may grow. */
export const KNOWLEDGE_JSON_ROUTES = /^(POST \/v1\/knowledge|PATCH \/v1\/knowledge\/[^/]+)$/;

const TOO_LARGE = [
  413,
  'Content over 1 MiB, or a JSON body over 4 MiB (`payload_too_large`)',
] as const;
const WAITING = `${KNOWLEDGE_WRITES_WAITING} more writes of documents of the organization already wait on this instance (\`too_many_streams\`, with Retry-After)`;
const WRITES_WAITING = [429, `Rate limited, or ${WAITING}`] as const;
/** A write of content also counts it into the organization's day, and holds its body (KnowledgeBodies). */
const CONTENT_WRITES_REFUSED = [
  429,
  `Rate limited (\`rate_limited\`; also when the organization's new content this UTC day would pass KNOWLEDGE_DAILY_BYTES, with Retry-After the seconds to the next UTC midnight), or ${WAITING}, or the account's writes on this instance hold ${KNOWLEDGE_BODY_BYTES_PER_ACCOUNT / (1024 * 1024)} MiB of bodies already (\`too_many_streams\`)`,
] as const;

@ApiTags('knowledge')
@Controller('v1/knowledge')
export class KnowledgeController {
  constructor(private readonly knowledge: KnowledgeService) {}

  @Post()
  @HttpCode(201)
  @Scopes('read_write')
  // Above the upload's interceptors, so it runs after them: a multipart body's key covers the file.
  @AcceptsIdempotencyKey()
  // KnowledgeBodies: the account's share before the body is read (the lowest runs first), the
  // instance's once it is.
  @UseInterceptors(KnowledgeBodyReadInterceptor)
  @ParsesJsonBodyAfterGuards()
  @UseInterceptors(FileInterceptor('file', { limits: UPLOAD_LIMITS }), KnowledgeUploadInterceptor)
  @UseInterceptors(KnowledgeBodyInterceptor)
  @ApiOperation({
    summary:
      'Adds a document: chunked, searchable and drawn on by replies as soon as this answers (docs/knowledge.md)',
    description:
      'JSON, or multipart/form-data with a `file` part (text/plain, text/markdown or text/html, whose text is kept) and the other fields as form fields.',
  })
  @ApiConsumes('application/json', 'multipart/form-data')
  @ApiExtraModels(CreateKnowledgeDto, CreateKnowledgeFormDto)
  @ApiBody({
    schema: {
      oneOf: [
        { $ref: getSchemaPath(CreateKnowledgeDto) },
        { $ref: getSchemaPath(CreateKnowledgeFormDto) },
      ],
    },
  })
  @ApiCreatedResponse({ type: KnowledgeDocumentDto })
  @ApiErrors(
    400,
    [404, 'A personality id that is not one of the organization (`not_found`)'],
    [
      409,
      "The organization's documents would hold more than KNOWLEDGE_MAX_BYTES (`knowledge_limit_reached`)",
    ],
    [...TOO_LARGE],
    [
      415,
      'A file of another type, or a body neither JSON nor multipart (`unsupported_media_type`)',
    ],
    [...CONTENT_WRITES_REFUSED],
  )
  create(
    @Caller() caller: CallerContext,
    @Body() body: CreateKnowledgeDto,
    @ClientGone() clientGone: AbortSignal,
  ): Promise<KnowledgeDocumentDto> {
    return this.knowledge.create(caller.organizationId, body, clientGone);
  }

  @Get()
  @Scopes('read')
  @ApiOperation({ summary: "The organization's documents, oldest first, without their content" })
  @ApiPage(KnowledgeDocumentDto)
  @ApiErrors(400)
  list(
    @Caller() caller: CallerContext,
    @Query() query: IdListQueryDto,
  ): Promise<Page<KnowledgeDocumentDto>> {
    return this.knowledge.list(caller.organizationId, query.limit, query.starting_after);
  }

  @Get('search')
  @Scopes('read')
  @ApiOperation({
    summary:
      "Chunks of the organization's documents holding words of `q`, most relevant first (full-text search in each document's language)",
  })
  @ApiOkResponse({ type: KnowledgeSearchResultDto })
  @ApiErrors(400)
  search(
    @Caller() caller: CallerContext,
    @Query() query: KnowledgeSearchQueryDto,
  ): Promise<KnowledgeSearchResultDto> {
    return this.knowledge.search(caller.organizationId, {
      q: query.q,
      personalityId: query.personality_id,
      limit: query.limit,
    });
  }

  @Get(':id')
  @Scopes('read')
  @ApiOperation({ summary: 'One document, with its content' })
  @ApiOkResponse({ type: KnowledgeDocumentWithContentDto })
  @ApiErrors(404)
  get(
    @Caller() caller: CallerContext,
    @Param('id', documentId) id: string,
  ): Promise<KnowledgeDocumentWithContentDto> {
    return this.knowledge.get(caller.organizationId, id);
  }

  @Patch(':id')
  @Scopes('read_write')
  @UseInterceptors(KnowledgeBodyReadInterceptor)
  @ParsesJsonBodyAfterGuards()
  @UseInterceptors(KnowledgeBodyInterceptor)
  @ApiOperation({
    summary:
      'Changes the title, the content (chunked again, searchable once this answers) or the personalities',
  })
  @ApiOkResponse({ type: KnowledgeDocumentDto })
  @ApiErrors(
    400,
    [404, 'No such document, or a personality id that is not one of the organization'],
    [409, 'The new content would pass KNOWLEDGE_MAX_BYTES (`knowledge_limit_reached`)'],
    [...TOO_LARGE],
    [...CONTENT_WRITES_REFUSED],
  )
  update(
    @Caller() caller: CallerContext,
    @Param('id', documentId) id: string,
    @Body() body: UpdateKnowledgeDto,
    @ClientGone() clientGone: AbortSignal,
  ): Promise<KnowledgeDocumentDto> {
    return this.knowledge.update(caller.organizationId, id, body, clientGone);
  }

  @Delete(':id')
  @HttpCode(204)
  @Scopes('read_write')
  @ApiOperation({ summary: 'Deletes a document and its chunks; no reply draws on it again' })
  @ApiNoContentResponse()
  @ApiErrors(404, [...WRITES_WAITING])
  async remove(
    @Caller() caller: CallerContext,
    @Param('id', documentId) id: string,
    @ClientGone() clientGone: AbortSignal,
  ): Promise<void> {
    await this.knowledge.remove(caller.organizationId, id, clientGone);
  }
}
