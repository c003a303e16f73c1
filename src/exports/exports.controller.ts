import { Controller, Get, Header, Param, Res, StreamableFile } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { Public, Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { withEnvelopeOnFailure } from '../common/http/stream-errors';
import { ApiErrors } from '../common/openapi/api-responses';
import { ModelDocumentDto, PmfDocumentDto } from './dto/export.dto';
import { StreamSlots } from '../common/streams/stream-slots.service';
import { UserIdParamDto } from '../end-users/dto/user-id';
import { byteBoundedReadable } from '../common/streams/byte-bounded';
import { ExportsService } from './exports.service';
import { readPmfV1Schema } from './pmf-v1';

function attachment(kind: string, userId: string): string {
  // The user_id is the customer's text: only the RFC 5987 form carries it, percent-encoded.
  return `attachment; filename="${kind}.json"; filename*=UTF-8''${extendedValue(`${kind}-${userId}`)}.json`;
}

/**
 * RFC 5987's value-chars: encodeURIComponent leaves ' ( ) * as they are, which the grammar does
 * not allow, and a strict parser refused the header of a user_id holding one (found by review).
 */
function extendedValue(text: string): string {
  return encodeURIComponent(text).replace(
    /['()*]/g,
    (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

@ApiTags('end-users')
@Controller('v1/end-users/:user_id')
export class ExportsController {
  constructor(
    private readonly exportsService: ExportsService,
    private readonly slots: StreamSlots,
  ) {}

  @Get('export')
  @Scopes('read')
  @ApiOperation({
    summary:
      "Right to portability: all of the end user's data in the Personality and Memory Format v1 (streamed)",
    description: 'The format is published at GET /v1/formats/pmf-v1.schema.json.',
  })
  @ApiProduces('application/json')
  @ApiOkResponse({
    description:
      'A PMF v1 document, sent as an attachment; its JSON Schema is GET /v1/formats/pmf-v1.schema.json',
    type: PmfDocumentDto,
  })
  @ApiErrors(400, 404, [
    429,
    'Rate limited, or the organization has STREAMS_PER_ORG exports open (`too_many_streams`)',
  ])
  export(
    @Caller() caller: CallerContext,
    @Param() params: UserIdParamDto,
    @Res({ passthrough: true }) response: Response,
  ): Promise<StreamableFile> {
    return this.stream(
      caller.organizationId,
      response,
      () => this.exportsService.exportDocument(caller.organizationId, params.user_id),
      attachment('pmf-v1', params.user_id),
    );
  }

  @Get('model')
  @Scopes('read')
  @ApiOperation({
    summary:
      'Subject access: every stored row about the end user, table by table, as raw JSON (streamed)',
  })
  @ApiOkResponse({
    description:
      '`{user_id, generated_at, tables: {end_users, relationship_months, memories, end_user_facts, token_usage_end_user_months, end_user_token_days, tool_turns, idempotency_keys, audit_events}}`',
    type: ModelDocumentDto,
  })
  @ApiErrors(400, 404, [
    429,
    'Rate limited, or the organization has STREAMS_PER_ORG exports open (`too_many_streams`)',
  ])
  model(
    @Caller() caller: CallerContext,
    @Param() params: UserIdParamDto,
    @Res({ passthrough: true }) response: Response,
  ): Promise<StreamableFile> {
    return this.stream(caller.organizationId, response, () =>
      this.exportsService.modelDocument(caller.organizationId, params.user_id),
    );
  }

  /**
   * Takes one of the organization's stream slots, then streams the JSON document `write` starts
   * (its 404 comes before any byte), holding about STREAM_BUFFER_BYTES for a reader that is slow.
   */
  private async stream(
    organizationId: string,
    response: Response,
    write: () => Promise<AsyncIterable<string>>,
    disposition?: string,
  ): Promise<StreamableFile> {
    this.slots.take(organizationId, response);
    const chunks = await write();
    return withEnvelopeOnFailure(
      new StreamableFile(byteBoundedReadable(chunks), {
        type: 'application/json; charset=utf-8',
        disposition,
      }),
    );
  }
}

@ApiTags('formats')
@Public()
@Controller('v1/formats')
export class FormatsController {
  private readonly pmfV1 = readPmfV1Schema();

  @Get('pmf-v1.schema.json')
  @Header('Content-Type', 'application/schema+json; charset=utf-8')
  @ApiOperation({
    summary: 'The JSON Schema (draft 2020-12) of the Personality and Memory Format v1',
  })
  @ApiProduces('application/schema+json')
  @ApiOkResponse({
    description: 'A JSON Schema (draft 2020-12)',
    schema: { type: 'object', additionalProperties: true },
  })
  pmfV1Schema(): object {
    return this.pmfV1;
  }
}
