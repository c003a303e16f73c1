import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import type { EngineConfig } from '../config/engine.config';
import { EndUsersModule } from '../end-users/end-users.module';
import { PersonalitiesModule } from '../personalities/personalities.module';
import { VocabulariesModule } from '../vocabularies/vocabularies.module';
import { LocalResponseEngine } from './engine/local-response-engine';
import { OpenAiResponseEngine } from './engine/openai-response-engine';
import { RESPONSE_ENGINE } from './engine/response-engine';
import { RespondController } from './respond.controller';
import { RespondRepository } from './respond.repository';
import { RespondService } from './respond.service';
import { IdempotencyModule } from '../idempotency/idempotency.module';

@Module({
  imports: [IdempotencyModule, EndUsersModule, PersonalitiesModule, VocabulariesModule],
  controllers: [RespondController],
  providers: [
    RespondRepository,
    RespondService,
    {
      provide: RESPONSE_ENGINE,
      inject: [ConfigService],
      useFactory: (config: ConfigService) =>
        config.getOrThrow<EngineConfig>('engine').engine === 'openai'
          ? new OpenAiResponseEngine(config)
          : new LocalResponseEngine(),
    },
  ],
})
export class RespondModule {}
