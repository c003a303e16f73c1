import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module';
import { FailingEndpointsWorker } from './failing-endpoints.worker';
import { WebhookDeliveryWorker } from './webhook-delivery.worker';
import { WebhookEndpointsController } from './webhook-endpoints.controller';
import { WebhookEndpointsService } from './webhook-endpoints.service';
import { WebhookEventsService } from './webhook-events.service';
import { WebhooksRepository } from './webhooks.repository';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { UsersModule } from '../users/users.module';

/**
 * Outbound webhooks (docs/webhooks.md). Import it and inject WebhookEventsService to send an
 * event from the transaction of a change (`emit`, or `step` inside a one-statement change);
 * FailingEndpointsWorker.onDisabled to be told of endpoints the service disabled.
 */
@Module({
  imports: [IdempotencyModule, AuditModule, UsersModule],
  controllers: [WebhookEndpointsController],
  providers: [
    WebhooksRepository,
    WebhookEventsService,
    WebhookEndpointsService,
    WebhookDeliveryWorker,
    FailingEndpointsWorker,
  ],
  exports: [WebhookEventsService, FailingEndpointsWorker],
})
export class WebhooksModule {}
