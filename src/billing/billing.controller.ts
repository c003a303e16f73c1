import { Body, Controller, Get, HttpCode, Post, Query } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { IdempotencyKey } from '../common/http/idempotency-key';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import type { Page } from '../common/pagination/pagination';
import { BillingService } from './billing.service';
import { BillingUsageDto, InvoiceDto, SetupIntentDto, SubscriptionDto } from './dto/billing.dto';
import { MonthQueryDto } from '../usage/dto/usage.dto';
import { CreateSubscriptionDto, ListInvoicesQueryDto } from './dto/billing-requests.dto';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';

const NOT_CONFIGURED: [number, string] = [
  503,
  'No payment provider configured (`billing_not_configured`)',
];

@ApiTags('billing')
@Scopes('admin')
@Controller('v1/billing')
export class BillingController {
  constructor(private readonly billing: BillingService) {}

  @Get('invoices')
  @ApiOperation({ summary: "The organization's invoices, newest first (Stripe's cursor)" })
  @ApiPage(InvoiceDto)
  @ApiErrors(400, 502, NOT_CONFIGURED)
  listInvoices(
    @Caller() caller: CallerContext,
    @Query() query: ListInvoicesQueryDto,
  ): Promise<Page<InvoiceDto>> {
    return this.billing.listInvoices(caller.organizationId, query.limit, query.starting_after);
  }

  @Get('usage')
  @ApiOperation({
    summary:
      "The month's metered usage: active relationships, provider tokens, meter events not yet at Stripe",
  })
  @ApiOkResponse({ type: BillingUsageDto })
  @ApiErrors(400, NOT_CONFIGURED)
  usage(@Caller() caller: CallerContext, @Query() query: MonthQueryDto): Promise<BillingUsageDto> {
    return this.billing.usageOf(caller.organizationId, query.month);
  }

  @Post('payment-methods')
  @AcceptsIdempotencyKey()
  @HttpCode(201)
  @ApiOperation({
    summary: 'Starts adding a payment method: a SetupIntent whose client_secret Stripe.js confirms',
    description:
      'With an Idempotency-Key, a retry gets the same SetupIntent back: Stripe is sent a digest of the key.',
  })
  @ApiCreatedResponse({ type: SetupIntentDto })
  @ApiErrors(400, 502, NOT_CONFIGURED)
  createPaymentMethod(
    @Caller() caller: CallerContext,
    @IdempotencyKey() idempotencyKey: string | undefined,
  ): Promise<SetupIntentDto> {
    return this.billing.createSetupIntent(caller.organizationId, idempotencyKey);
  }

  @Get('subscription')
  @ApiOperation({ summary: "The organization's subscription (the live one, else the latest)" })
  @ApiOkResponse({ type: SubscriptionDto })
  @ApiErrors([404, 'The organization has never subscribed'], NOT_CONFIGURED)
  getSubscription(@Caller() caller: CallerContext): Promise<SubscriptionDto> {
    return this.billing.getSubscription(caller.organizationId);
  }

  @Post('subscription')
  @AcceptsIdempotencyKey()
  @HttpCode(201)
  @ApiOperation({ summary: 'Starts the subscription (one live subscription per organization)' })
  @ApiCreatedResponse({ type: SubscriptionDto })
  @ApiErrors(400, [409, 'A live subscription exists (`subscription_exists`)'], 502, NOT_CONFIGURED)
  createSubscription(
    @Caller() caller: CallerContext,
    @Body() body: CreateSubscriptionDto,
  ): Promise<SubscriptionDto> {
    return this.billing.createSubscription(caller, body.price_id);
  }

  @Post('subscription/suspend')
  @AcceptsIdempotencyKey()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Voluntarily suspends the subscription: collection pauses (invoices voided)',
  })
  @ApiOkResponse({ type: SubscriptionDto })
  @ApiErrors(
    [404, 'No live subscription'],
    [409, 'The subscription cannot be suspended in its status (`subscription_not_active`)'],
    502,
    NOT_CONFIGURED,
  )
  suspend(@Caller() caller: CallerContext): Promise<SubscriptionDto> {
    return this.billing.suspend(caller);
  }

  @Post('subscription/resume')
  @AcceptsIdempotencyKey()
  @HttpCode(200)
  @ApiOperation({ summary: 'Resumes a suspended subscription: collection starts again' })
  @ApiOkResponse({ type: SubscriptionDto })
  @ApiErrors([404, 'No live subscription'], 502, NOT_CONFIGURED)
  resume(@Caller() caller: CallerContext): Promise<SubscriptionDto> {
    return this.billing.resume(caller);
  }
}
