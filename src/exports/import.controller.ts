import { Controller, Post } from '@nestjs/common';
import { ApiBody, ApiCreatedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { DocumentBody, ReadsDocumentBody } from '../common/http/document-body';
import type { SpooledDocument } from '../common/http/spooled-document';
import { ApiErrors } from '../common/openapi/api-responses';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';
import { PmfDocumentDto } from './dto/export.dto';
import { ImportResultDto } from './dto/import-result.dto';
import { TakesImportSlot } from './import-slots';
import { ImportService } from './import.service';

/**
 * The route whose body is a whole document of up to IMPORT_MAX_BYTES instead of 1 MiB
 * (app.setup.ts), received once the guards have passed and an import slot is free
 * (TakesImportSlot, IMPORTS_IN_FLIGHT), into a temporary file under the same hostile-input checks
 * as every body (ReadsDocumentBody), and read from there a part at a time.
 */
export const IMPORT_ROUTE = 'POST /v1/end-users/import';

@ApiTags('end-users')
@Controller('v1/end-users')
export class ImportController {
  constructor(private readonly imports: ImportService) {}

  @Post('import')
  @AcceptsIdempotencyKey()
  @ReadsDocumentBody()
  @TakesImportSlot()
  @Scopes('read_write')
  @ApiOperation({
    summary:
      'Creates an end user from a PMF v1 document (as /export writes it): memories, facts and the personalities they need; all or nothing',
    description:
      'The body is a Personality and Memory Format v1 document, validated against GET /v1/formats/pmf-v1.schema.json, of at most IMPORT_MAX_BYTES (default 16 MiB). ' +
      "A personality whose id is the organization's is used as it is; any other is created from the document (new id). " +
      "Every field passes the rules the API applies to it (a personality's as PATCH /v1/personalities/{id} takes them). " +
      "Memories keep their order, roles, contents, emotions, vocabulary versions and created_at under new ids; their safety verdicts are this service's classifier's, not the document's. Facts keep their contents, sources, times and messages. " +
      'Relationships are not imported and no active relationship is counted. ' +
      'The document is read as a stream, never whole; an instance runs at most IMPORTS_IN_FLIGHT imports at once. See docs/pmf-v1.md#import.',
  })
  @ApiBody({
    type: PmfDocumentDto,
    description:
      'A PMF v1 document, as GET /v1/end-users/{user_id}/export writes it (its JSON Schema: GET /v1/formats/pmf-v1.schema.json)',
  })
  @ApiCreatedResponse({ type: ImportResultDto, description: 'The end user and what was written' })
  @ApiErrors(
    [
      400,
      'Not a PMF v1 document, or one the service cannot take (`validation_failed`, details by JSON pointer); not JSON (`malformed_json`)',
    ],
    [
      409,
      'The user_id exists in the organization (`end_user_exists`), or is under deletion (`end_user_under_deletion`, with `erasure_expected_at`)',
    ],
    [413, 'Body over IMPORT_MAX_BYTES (`payload_too_large`)'],
    415,
    [
      429,
      'Rate limited, or this instance already runs IMPORTS_IN_FLIGHT imports (`too_many_streams`, with Retry-After)',
    ],
  )
  import(
    @Caller() caller: CallerContext,
    @DocumentBody() document: SpooledDocument,
  ): Promise<ImportResultDto> {
    return this.imports.import(caller, document);
  }
}
