import { Module } from '@nestjs/common';
import { OrganizationsModule } from '../organizations/organizations.module';
import { AuditModule } from '../audit/audit.module';
import { WebhooksModule } from '../webhooks/webhooks.module';
import { PersonalitiesController } from './personalities.controller';
import { PersonalitiesRepository } from './personalities.repository';
import { PersonalitiesService } from './personalities.service';
import { IdempotencyModule } from '../idempotency/idempotency.module';

@Module({
  imports: [IdempotencyModule, AuditModule, WebhooksModule, OrganizationsModule],
  controllers: [PersonalitiesController],
  providers: [PersonalitiesRepository, PersonalitiesService],
  exports: [PersonalitiesService],
})
export class PersonalitiesModule {}
