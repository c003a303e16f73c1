import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuditModule } from '../audit/audit.module';
import { WebhooksModule } from '../webhooks/webhooks.module';
import { CatalogPersonality } from './entities/catalog-personality.entity';
import { Personality } from './entities/personality.entity';
import { PersonalitiesController } from './personalities.controller';
import { PersonalitiesRepository } from './personalities.repository';
import { PersonalitiesService } from './personalities.service';
import { IdempotencyModule } from '../idempotency/idempotency.module';

@Module({
  imports: [
    IdempotencyModule,
    TypeOrmModule.forFeature([CatalogPersonality, Personality]),
    AuditModule,
    WebhooksModule,
  ],
  controllers: [PersonalitiesController],
  providers: [PersonalitiesRepository, PersonalitiesService],
  exports: [PersonalitiesService],
})
export class PersonalitiesModule {}
