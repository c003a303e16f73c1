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
  ApiAcceptedResponse,
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
import { IdListQueryDto, type Page } from '../common/pagination/pagination';
import { ApiUnionSchema } from '../common/openapi/union-schemas';
import { WebhookDeliveryDto } from './dto/webhook-delivery.dto';
import { WEBHOOK_EVENTS } from './dto/webhook-event.dto';
import {
  CreatedWebhookEndpointDto,
  CreateWebhookEndpointDto,
  UpdateWebhookEndpointDto,
  WebhookEndpointDto,
  WebhookPingDto,
} from './dto/webhook-endpoint.dto';
import { WebhookEndpointsService } from './webhook-endpoints.service';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';

const endpointId = uuidOr404('Webhook endpoint');
const deliveryId = uuidOr404('Webhook delivery');

@ApiTags('webhooks')
// What the endpoints receive: the union of the event schemas, told apart by `type`.
@ApiUnionSchema('WebhookEventDto', 'type', WEBHOOK_EVENTS)
@Scopes('admin')
@Controller('v1/webhook-endpoints')
export class WebhookEndpointsController {
  constructor(private readonly endpoints: WebhookEndpointsService) {}

  @Post()
  @AcceptsIdempotencyKey()
  @HttpCode(201)
  @Header('Cache-Control', 'no-store')
  @ApiOperation({
    summary:
      'Adds an endpoint that receives signed events; its signing secret is in this response only',
  })
  @ApiCreatedResponse({ type: CreatedWebhookEndpointDto })
  @ApiErrors(
    [400, 'Invalid request, or a URL that is or resolves to a non-public address'],
    [409, 'The organization has 20 endpoints already (`webhook_endpoint_limit`)'],
  )
  create(
    @Caller() caller: CallerContext,
    @Body() body: CreateWebhookEndpointDto,
  ): Promise<CreatedWebhookEndpointDto> {
    return this.endpoints.create(caller, body);
  }

  @Get()
  @ApiOperation({ summary: "The organization's webhook endpoints, without their secrets" })
  @ApiPage(WebhookEndpointDto)
  @ApiErrors(400)
  list(
    @Caller() caller: CallerContext,
    @Query() query: IdListQueryDto,
  ): Promise<Page<WebhookEndpointDto>> {
    return this.endpoints.list(caller.organizationId, query.limit, query.starting_after);
  }

  @Get(':id')
  @ApiOperation({ summary: 'One webhook endpoint, without its secret' })
  @ApiOkResponse({ type: WebhookEndpointDto })
  @ApiErrors(404)
  get(
    @Caller() caller: CallerContext,
    @Param('id', endpointId) id: string,
  ): Promise<WebhookEndpointDto> {
    return this.endpoints.get(caller.organizationId, id);
  }

  @Patch(':id')
  @ApiOperation({
    summary:
      'Changes the URL, events, description or status; a disabled endpoint receives nothing, its pending attempts end',
  })
  @ApiOkResponse({ type: WebhookEndpointDto })
  @ApiErrors([400, 'Invalid request, or a URL that is or resolves to a non-public address'], 404)
  update(
    @Caller() caller: CallerContext,
    @Param('id', endpointId) id: string,
    @Body() body: UpdateWebhookEndpointDto,
  ): Promise<WebhookEndpointDto> {
    return this.endpoints.update(caller, id, body);
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ summary: 'Deletes an endpoint; nothing more is sent to it' })
  @ApiNoContentResponse()
  @ApiErrors(404)
  async remove(
    @Caller() caller: CallerContext,
    @Param('id', endpointId) id: string,
  ): Promise<void> {
    await this.endpoints.remove(caller, id);
  }

  @Post(':id/test')
  @AcceptsIdempotencyKey()
  @HttpCode(202)
  @ApiOperation({ summary: 'Sends a ping event to this endpoint (only), delivered like any event' })
  @ApiAcceptedResponse({ type: WebhookPingDto })
  @ApiErrors(404, [409, 'The endpoint is disabled (`webhook_endpoint_disabled`)'])
  ping(
    @Caller() caller: CallerContext,
    @Param('id', endpointId) id: string,
  ): Promise<WebhookPingDto> {
    return this.endpoints.ping(caller.organizationId, id);
  }

  @Post(':id/deliveries/:delivery_id/redeliver')
  @AcceptsIdempotencyKey()
  @HttpCode(202)
  @ApiOperation({
    summary:
      "Sends the delivery's event to this endpoint again, now: a new attempt (the next number), answered here pending",
  })
  @ApiAcceptedResponse({ type: WebhookDeliveryDto })
  @ApiErrors(404, [
    409,
    'The endpoint is disabled (`webhook_endpoint_disabled`), or many redeliveries of this event raced for the next attempt number (`conflict`: try again)',
  ])
  redeliver(
    @Caller() caller: CallerContext,
    @Param('id', endpointId) id: string,
    @Param('delivery_id', deliveryId) delivery: string,
  ): Promise<WebhookDeliveryDto> {
    return this.endpoints.redeliver(caller, id, delivery);
  }

  @Get(':id/deliveries')
  @ApiOperation({ summary: "The endpoint's delivery attempts, newest first" })
  @ApiPage(WebhookDeliveryDto)
  @ApiErrors(400, 404)
  deliveries(
    @Caller() caller: CallerContext,
    @Param('id', endpointId) id: string,
    @Query() query: IdListQueryDto,
  ): Promise<Page<WebhookDeliveryDto>> {
    return this.endpoints.deliveries(caller.organizationId, id, query.limit, query.starting_after);
  }
}
