import { ApiProperty } from '@nestjs/swagger';
import type Stripe from 'stripe';
import {
  type BillingSubscription,
  SUBSCRIPTION_STATUSES,
  type SubscriptionStatus,
} from '../entities/billing-subscription.entity';

export class InvoiceDto {
  @ApiProperty({ example: 'in_1PqR2sT3uV4wX5yZ' })
  id: string;

  @ApiProperty({ nullable: true, type: String, example: 'A1B2C3D4-0001' })
  number: string | null;

  @ApiProperty({
    nullable: true,
    type: String,
    enum: ['draft', 'open', 'paid', 'uncollectible', 'void'],
  })
  status: string | null;

  @ApiProperty({ example: 'eur', description: 'ISO 4217, lower case' })
  currency: string;

  @ApiProperty({ example: 4900, description: 'In the smallest unit of the currency' })
  amount_due: number;

  @ApiProperty({ example: 4900, description: 'In the smallest unit of the currency' })
  amount_paid: number;

  @ApiProperty({ example: '2026-11-01T00:00:00.000Z' })
  created: string;

  @ApiProperty({ nullable: true, type: String })
  hosted_invoice_url: string | null;

  @ApiProperty({ nullable: true, type: String })
  invoice_pdf: string | null;
}

export class SetupIntentDto {
  @ApiProperty({ example: 'seti_1PqR2sT3uV4wX5yZ' })
  setup_intent_id: string;

  @ApiProperty({
    description:
      'Complete the flow with Stripe.js (confirmSetup). Not stored by the service and not retrievable again.',
  })
  client_secret: string;
}

export class LatestInvoiceDto {
  @ApiProperty({ example: 'in_1PqR2sT3uV4wX5yZ' })
  id: string;

  @ApiProperty({ enum: ['paid', 'payment_failed'] })
  status: string;

  @ApiProperty({ description: 'When Stripe reported it' })
  at: string;
}

export class SubscriptionDto {
  @ApiProperty({ example: 'sub_1PqR2sT3uV4wX5yZ', description: "Stripe's subscription id" })
  id: string;

  @ApiProperty({
    enum: [...SUBSCRIPTION_STATUSES],
    description: "Stripe's status, except `suspended` while collection is paused",
  })
  status: SubscriptionStatus;

  @ApiProperty({ nullable: true, type: String, example: 'price_1PqR2sT3uV4wX5yZ' })
  price_id: string | null;

  @ApiProperty({ nullable: true, type: String })
  current_period_end: string | null;

  @ApiProperty()
  cancel_at_period_end: boolean;

  @ApiProperty({ nullable: true, type: LatestInvoiceDto })
  latest_invoice: LatestInvoiceDto | null;

  @ApiProperty()
  created_at: string;

  @ApiProperty()
  updated_at: string;
}

export class WebhookReceivedDto {
  @ApiProperty({ example: true })
  received: true;
}

export function toInvoiceResponse(invoice: Stripe.Invoice): InvoiceDto {
  return {
    id: invoice.id,
    number: invoice.number ?? null,
    status: invoice.status ?? null,
    currency: invoice.currency,
    amount_due: invoice.amount_due,
    amount_paid: invoice.amount_paid,
    created: new Date(invoice.created * 1000).toISOString(),
    hosted_invoice_url: invoice.hosted_invoice_url ?? null,
    invoice_pdf: invoice.invoice_pdf ?? null,
  };
}

export function toSubscriptionResponse(row: BillingSubscription): SubscriptionDto {
  return {
    id: row.stripeSubscriptionId,
    status: row.status,
    price_id: row.priceId,
    current_period_end: row.currentPeriodEnd?.toISOString() ?? null,
    cancel_at_period_end: row.cancelAtPeriodEnd,
    latest_invoice:
      row.latestInvoiceId && row.latestInvoiceStatus && row.latestInvoiceAt
        ? {
            id: row.latestInvoiceId,
            status: row.latestInvoiceStatus,
            at: row.latestInvoiceAt.toISOString(),
          }
        : null,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

export class BillingUsageDto {
  @ApiProperty({ example: '2026-11' })
  month: string;

  @ApiProperty({
    example: 42,
    description:
      'Relationships active in the month: each new one is one meter event (STRIPE_METER_EVENT_NAME)',
  })
  active_relationships: number;

  @ApiProperty({
    example: 1_234_567,
    description: 'Provider tokens (prompt + completion) of the month',
  })
  tokens: number;

  @ApiProperty({
    example: 0,
    description:
      'Meter events of the month not yet taken by Stripe (queued or waiting for a retry)',
  })
  meter_events_pending: number;
}
