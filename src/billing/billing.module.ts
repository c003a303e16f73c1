import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module';
import { BillingWebhooksController } from './billing-webhooks.controller';
import { BillingWebhooksService } from './billing-webhooks.service';
import { BillingController } from './billing.controller';
import { BillingRepository } from './billing.repository';
import { BillingService } from './billing.service';
import { StripeGateway } from './stripe-gateway';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { UsageModule } from '../usage/usage.module';
import { MeterEventsRepository } from './meter-events.repository';
import { MeterEventsWorker } from './meter-events.worker';

@Module({
  imports: [IdempotencyModule, AuditModule, UsageModule],
  controllers: [BillingController, BillingWebhooksController],
  providers: [
    StripeGateway,
    BillingRepository,
    BillingService,
    BillingWebhooksService,
    MeterEventsRepository,
    MeterEventsWorker,
  ],
})
export class BillingModule {}
