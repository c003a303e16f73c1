import { Module } from '@nestjs/common';
import { type EngineConfig, engineConfig } from '../config/engine.config';
import { type SafetyConfig, safetyConfig } from '../config/safety.config';
import { OrganizationsModule } from '../organizations/organizations.module';
import { LocalSafetyClassifier } from './local/local-safety-classifier';
import { OpenAiModerationClassifier } from './openai/openai-moderation-classifier';
import { SAFETY_CLASSIFIER } from './safety-categories';
import { SafetySettingsController } from './safety-settings.controller';
import { SafetySettingsRepository } from './safety-settings.repository';
import { SafetySettingsService } from './safety-settings.service';
import { ReplySafety } from './reply-safety.service';
import { FlaggedExchanges } from './flagged-exchanges.participant';
import { ScreenedReplies } from './screened-replies.generator';

/**
 * Safety in companion conversations (docs/safety.md): the organizations' settings and the
 * classifier replies are checked with, SAFETY_CLASSIFIER's, the local one built once.
 */
@Module({
  imports: [OrganizationsModule],
  controllers: [SafetySettingsController],
  providers: [
    SafetySettingsRepository,
    SafetySettingsService,
    ReplySafety,
    FlaggedExchanges,
    ScreenedReplies,
    LocalSafetyClassifier,
    {
      provide: SAFETY_CLASSIFIER,
      inject: [safetyConfig.KEY, engineConfig.KEY, LocalSafetyClassifier],
      useFactory: (safety: SafetyConfig, engine: EngineConfig, local: LocalSafetyClassifier) => {
        if (safety.classifier === 'local') return local;
        return new OpenAiModerationClassifier({
          apiKey: engine.openaiApiKey,
          baseUrl: engine.openaiBaseUrl,
          model: safety.moderationModel,
          timeoutMs: safety.moderationTimeoutMs,
          fallback: local,
        });
      },
    },
  ],
  // LocalSafetyClassifier: imports classify each memory with it (docs/pmf-v1.md#import).
  exports: [LocalSafetyClassifier],
})
export class SafetyModule {}
