import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuditModule } from '../audit/audit.module';
import { WebhooksModule } from '../webhooks/webhooks.module';
import { BillingWebhooksController } from './billing-webhooks.controller';
import { BillingWebhooksService } from './billing-webhooks.service';
import { BillingController } from './billing.controller';
import { BillingRepository } from './billing.repository';
import { BillingService } from './billing.service';
import { BillingCustomer } from './entities/billing-customer.entity';
import { BillingEvent } from './entities/billing-event.entity';
import { BillingSubscription } from './entities/billing-subscription.entity';
import { StripeGateway } from './stripe-gateway';
import { IdempotencyModule } from '../idempotency/idempotency.module';

@Module({
  imports: [
    IdempotencyModule,
    TypeOrmModule.forFeature([BillingCustomer, BillingSubscription, BillingEvent]),
    AuditModule,
    WebhooksModule,
  ],
  controllers: [BillingController, BillingWebhooksController],
  providers: [StripeGateway, BillingRepository, BillingService, BillingWebhooksService],
})
export class BillingModule {}
