import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

export const SAFETY_CLASSIFIERS = ['local', 'openai'] as const;

class SafetyEnv {
  @IsOptional()
  @IsIn(SAFETY_CLASSIFIERS)
  SAFETY_CLASSIFIER?: (typeof SAFETY_CLASSIFIERS)[number];

  @IsOptional()
  @IsString()
  @MaxLength(200)
  MODERATION_MODEL?: string;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(50)
  @Max(60_000)
  MODERATION_TIMEOUT_MS?: number;
}

/**
 * Who classifies messages and replies for safety (docs/safety.md). The `openai` classifier calls
 * the provider's /v1/moderations at OPENAI_BASE_URL with OPENAI_API_KEY; the local classifier
 * decides whenever it fails or takes longer than MODERATION_TIMEOUT_MS.
 */
export const safetyConfig = registerAs('safety', () => {
  const env = validateEnv(SafetyEnv);
  return {
    classifier: env.SAFETY_CLASSIFIER ?? 'local',
    moderationModel: env.MODERATION_MODEL ?? 'omni-moderation-latest',
    moderationTimeoutMs: env.MODERATION_TIMEOUT_MS ?? 2_000,
  };
});

export type SafetyConfig = ReturnType<typeof safetyConfig>;
