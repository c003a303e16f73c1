import { Controller, Headers, HttpCode, Post, Req } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { Public } from '../common/auth/auth.decorators';
import { ApiErrors } from '../common/openapi/api-responses';
import { BillingWebhooksService } from './billing-webhooks.service';
import { WebhookReceivedDto } from './dto/billing.dto';

@ApiTags('billing')
@Public()
@Controller('v1/billing/webhooks')
export class BillingWebhooksController {
  constructor(private readonly webhooks: BillingWebhooksService) {}

  @Post()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Receives Stripe events (signed; each event applied once, never backwards)',
  })
  @ApiHeader({
    name: 'stripe-signature',
    required: true,
    description: "Stripe's signature of the raw body",
  })
  @ApiOkResponse({ type: WebhookReceivedDto })
  @ApiErrors(
    [400, 'The signature is missing, wrong or older than 300 s (`invalid_signature`)'],
    [502, 'Re-reading the subscription from Stripe failed; Stripe retries'],
    [
      503,
      'No payment provider or webhook secret configured (`billing_not_configured`), or an invoice whose subscription is not mirrored yet (`service_unavailable`); Stripe retries',
    ],
  )
  async receive(
    @Req() request: Request & { rawBody?: Buffer },
    @Headers('stripe-signature') signature?: string,
  ): Promise<WebhookReceivedDto> {
    // The signature covers the exact bytes received, kept by the JSON body middleware.
    await this.webhooks.receive(request.rawBody, signature);
    return { received: true };
  }
}
