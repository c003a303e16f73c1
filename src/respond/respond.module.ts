import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { ReplyParticipantsModule } from '../common/reply/reply-participants.module';
import { Clock } from '../common/time/clock';
import { type EngineConfig, engineConfig } from '../config/engine.config';
import { EndUsersModule } from '../end-users/end-users.module';
import { PersonalitiesModule } from '../personalities/personalities.module';
import { VocabulariesModule } from '../vocabularies/vocabularies.module';
import { LocalResponseEngine } from './engine/local-response-engine';
import { OpenAiResponseEngine } from './engine/openai-response-engine';
import { RESPONSE_ENGINE } from './engine/response-engine';
import { CircuitBreakers } from './engine/routing/circuit-breakers';
import { EngineMetrics } from './engine/routing/engine-metrics';
import { RespondController } from './respond.controller';
import { RespondRepository } from './respond.repository';
import { RespondService } from './respond.service';
import { ReplyGenerators } from './reply-generators';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { ToolsModule } from '../tools/tools.module';
import { MemoryModule } from '../memory/memory.module';
import { SafetyModule } from '../safety/safety.module';
import { SpendModule } from '../spend/spend.module';
import { UsageModule } from '../usage/usage.module';

@Module({
  imports: [
    DiscoveryModule,
    IdempotencyModule,
    ReplyParticipantsModule,
    EndUsersModule,
    PersonalitiesModule,
    VocabulariesModule,
    ToolsModule,
    // Participants found by discovery, not injected: imported so that no app answers without
    // them (replies unscreened, budgets unenforced, nothing remembered).
    SafetyModule,
    SpendModule,
    MemoryModule,
    UsageModule,
  ],
  controllers: [RespondController],
  providers: [
    RespondRepository,
    RespondService,
    ReplyGenerators,
    CircuitBreakers,
    EngineMetrics,
    {
      provide: RESPONSE_ENGINE,
      inject: [engineConfig.KEY, CircuitBreakers, EngineMetrics, Clock],
      useFactory: (
        engine: EngineConfig,
        breakers: CircuitBreakers,
        metrics: EngineMetrics,
        clock: Clock,
      ) =>
        engine.engine === 'openai'
          ? new OpenAiResponseEngine(engine, breakers, metrics, clock)
          : new LocalResponseEngine(),
    },
  ],
})
export class RespondModule {}
