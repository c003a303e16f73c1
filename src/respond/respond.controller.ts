import { Body, Controller, HttpCode, Param, Post, Res, type StreamableFile } from '@nestjs/common';
import { ApiExtraModels, ApiOperation, ApiResponse, ApiTags, getSchemaPath } from '@nestjs/swagger';
import type { Response } from 'express';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { toErrorResponse } from '../common/errors/all-exceptions.filter';
import { clientGoneSignal } from '../common/http/client-signal';
import { ShutdownSignal } from '../common/lifecycle/shutdown-signal';
import { requestIdOf } from '../common/http/request-id';
import { eventStream, type ServerSentEvents } from '../common/http/server-sent-events';
import { ApiErrors } from '../common/openapi/api-responses';
import { StreamSlots } from '../common/streams/stream-slots.service';
import { ApiUnionSchema, unionSchemaRef } from '../common/openapi/union-schemas';
import {
  type RespondAnswer,
  RespondDeltaEventDto,
  RespondDoneEventDto,
  RespondDto,
  RespondErrorEventDto,
  RespondRequiresActionDto,
  RespondResponseDto,
  RespondToolCallsEventDto,
  ToolOutputsDto,
} from './dto/respond.dto';
import { type Conversation, RespondService } from './respond.service';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';
import { IdempotencyService } from '../idempotency/idempotency.service';

const EVENT_STREAM_DESCRIPTION = [
  'With `"stream": true`: `event: delta` / `data: {"text": "…"}` for each piece of the reply, then',
  '`event: done` / `data:` the same JSON a non-streamed call answers. A failure after the stream',
  'started (502 `engine_unavailable`, 504 `engine_timeout`) is `event: error` / `data:` the error',
  'envelope. Nothing is stored unless `done` is sent. A turn paused for client tools sends',
  '`event: tool_calls` / `data: {"turn_id", "tool_calls"}`, then `done` with',
  '`status: "requires_action"` (docs/tools.md).',
].join(' ');

/** The two answers of a reply: the completed one, or the pause for client tools. */
const ANSWER_SCHEMA = {
  oneOf: [
    { $ref: getSchemaPath(RespondResponseDto) },
    { $ref: getSchemaPath(RespondRequiresActionDto) },
  ],
};

const STREAM_EVENTS = {
  delta: RespondDeltaEventDto,
  tool_calls: RespondToolCallsEventDto,
  done: RespondDoneEventDto,
  error: RespondErrorEventDto,
};

@ApiTags('respond')
@Controller('v1/respond')
export class RespondController {
  constructor(
    private readonly respondService: RespondService,
    private readonly slots: StreamSlots,
    private readonly idempotency: IdempotencyService,
    private readonly shutdown: ShutdownSignal,
  ) {}

  @Post()
  @AcceptsIdempotencyKey()
  @HttpCode(200)
  @Scopes('read_write')
  @ApiOperation({
    summary:
      'A personality answers an end user (created on first contact); the exchange is remembered and the relationship counted for the month',
  })
  @ApiExtraModels(RespondResponseDto, RespondRequiresActionDto)
  @ApiUnionSchema('RespondStreamEventDto', 'event', STREAM_EVENTS)
  @ApiResponse({
    status: 200,
    description: `The reply, or a pause for client tools (\`requires_action\`). ${EVENT_STREAM_DESCRIPTION}`,
    content: {
      'application/json': { schema: ANSWER_SCHEMA },
      'text/event-stream': {
        // One event of the stream: its `event:` name and the JSON of its `data:`.
        schema: unionSchemaRef('RespondStreamEventDto'),
        example:
          'event: delta\ndata: {"text":"Congratulations"}\n\nevent: delta\ndata: {"text":" on the job!"}\n\nevent: done\ndata: {"personality_id":"…","user_id":"customer-42","reply":{"text":"Congratulations on the job!","emotion":{"name":"joy","intensity":0.7}},"vocabulary_version":"2.0.0","created_at":"2026-11-22T01:23:45.678Z"}\n\n',
      },
    },
  })
  @ApiErrors(
    400,
    [
      402,
      "The organization's monthly or the end user's daily token budget is spent (`budget_exceeded`; `details`: {scope, limit, used, resets_at})",
    ],
    [404, 'The personality is not one of the organization'],
    [409, 'The user_id is under deletion (`end_user_under_deletion`)'],
    [
      429,
      'Rate limited, or the organization has STREAMS_PER_ORG streams open (`too_many_streams`)',
    ],
    [502, 'The model provider failed, refused or could not be reached (`engine_unavailable`)'],
    [504, 'The model provider gave no complete reply within ENGINE_TIMEOUT_MS (`engine_timeout`)'],
  )
  async respond(
    @Caller() caller: CallerContext,
    @Body() body: RespondDto,
    @Res({ passthrough: true }) response: Response,
  ): Promise<RespondAnswer | StreamableFile> {
    return this.answer(caller, body.stream, response, () =>
      this.respondService.prepare(caller, body),
    );
  }

  @Post('turns/:turn_id/tool-outputs')
  @AcceptsIdempotencyKey()
  @HttpCode(200)
  @Scopes('read_write')
  @ApiOperation({
    summary:
      'Resumes a turn paused for client tools with their outputs; answers as /v1/respond does (docs/tools.md)',
  })
  @ApiResponse({
    status: 200,
    description: `The reply, or a further pause for client tools. ${EVENT_STREAM_DESCRIPTION}`,
    content: {
      'application/json': { schema: ANSWER_SCHEMA },
      'text/event-stream': { schema: unionSchemaRef('RespondStreamEventDto') },
    },
  })
  @ApiErrors(
    [400, 'Not exactly one output for every pending call (`validation_failed`)'],
    [402, 'A token budget is spent (`budget_exceeded`)'],
    [404, 'No pending turn of the organization has this id, or it expired (TOOL_TURN_TTL_SECONDS)'],
    [409, 'The turn was resumed already (`turn_not_pending`), or its user_id is under deletion'],
    [429, 'Rate limited, or STREAMS_PER_ORG streams are open (`too_many_streams`)'],
    [502, 'The model provider failed (`engine_unavailable`)'],
    [504, 'The model provider gave no complete reply in time (`engine_timeout`)'],
  )
  async toolOutputs(
    @Caller() caller: CallerContext,
    @Param('turn_id') turnId: string,
    @Body() body: ToolOutputsDto,
    @Res({ passthrough: true }) response: Response,
  ): Promise<RespondAnswer | StreamableFile> {
    return this.answer(caller, body.stream, response, () =>
      // Its key learns the turn's end user and personality before the reply writes
      // (docs/idempotency.md).
      this.respondService.prepareResumption(caller, turnId, body, (turn) =>
        this.idempotency.aboutTurn(turn),
      ),
    );
  }

  /**
   * A new message and a resumed turn answer alike: prepared (the 4xx before anything is written
   * or streamed), then replied to, as JSON or as a stream of events.
   */
  private async answer(
    caller: CallerContext,
    stream: boolean | undefined,
    response: Response,
    prepare: () => Promise<Conversation>,
  ): Promise<RespondAnswer | StreamableFile> {
    // Aborted when the client leaves, or when a shutdown abandons the reply (its reason then
    // the 503 the client is answered: askEngine throws it, streamReply sends it).
    const signal = this.shutdown.alongside(clientGoneSignal(response), response);
    // The slot first: a refused stream creates no end user and claims no turn.
    if (stream) this.slots.take(caller.organizationId, response);
    const conversation = await prepare();
    if (!stream) return this.respondService.reply(conversation, { signal });
    return this.stream(conversation, response, signal);
  }

  private stream(
    conversation: Conversation,
    response: Response,
    signal: AbortSignal,
  ): StreamableFile {
    response.setHeader('Cache-Control', 'no-cache');
    // A comment every half idle timeout while the model thinks: a slow provider's first token
    // meets ENGINE_TIMEOUT_MS (504), not the idle cut.
    return eventStream(this.slots.idleTimeoutMs / 2, (events) =>
      this.streamReply(conversation, events, response, signal),
    );
  }

  private async streamReply(
    conversation: Conversation,
    events: ServerSentEvents,
    response: Response,
    signal: AbortSignal,
  ): Promise<void> {
    try {
      const result = await this.respondService.reply(conversation, {
        signal,
        onDelta: (text) => events.send('delta', { text }),
      });
      // The exchange is stored (or the turn paused): a retry with the same Idempotency-Key gets
      // this answer, even if this client leaves before reading it.
      await this.idempotency.recordAnswer(200, result);
      if (result.status === 'requires_action') {
        await events.send('tool_calls', { turn_id: result.turn_id, tool_calls: result.tool_calls });
      }
      await events.send('done', result);
    } catch (error) {
      // The client left: nobody reads an error event.
      if (signal.aborted && !(signal.reason instanceof AppError)) return;
      const { status, body } = toErrorResponse(error, requestIdOf(response.req));
      // The access line names an unexpected error, as the exception filter does.
      if (status === 500) (response as Response & { err?: Error }).err = error as Error;
      await events.send('error', body);
    } finally {
      // No answer recorded (the reply failed, or its client left before it was stored): a retry
      // with the same Idempotency-Key runs afresh.
      await this.idempotency.giveUpUnanswered();
    }
  }
}
