import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, IsUrl, Max, MaxLength, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

export const ENGINES = ['local', 'openai'] as const;
export type EngineName = (typeof ENGINES)[number];

class EngineEnv {
  @IsOptional()
  @IsIn(ENGINES)
  RESPONSE_ENGINE?: EngineName;

  @IsOptional()
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  OPENAI_BASE_URL?: string;

  @IsOptional()
  @IsString()
  OPENAI_API_KEY?: string;

  @IsOptional()
  @IsString()
  @MaxLength(200)
  OPENAI_MODEL?: string;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(100)
  @Max(600_000)
  ENGINE_TIMEOUT_MS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(0)
  @Max(200)
  ENGINE_HISTORY_MESSAGES?: number;
}

/** Which engine writes replies, and how the OpenAI-compatible one reaches its provider. */
export const engineConfig = registerAs('engine', () => {
  const env = validateEnv(EngineEnv);
  const engine = env.RESPONSE_ENGINE ?? 'local';
  if (engine === 'openai' && !env.OPENAI_MODEL) {
    throw new Error(
      'Invalid configuration:\n  OPENAI_MODEL: required when RESPONSE_ENGINE=openai (the default model)',
    );
  }
  return {
    engine,
    /** undefined: the SDK's default (api.openai.com). */
    openaiBaseUrl: env.OPENAI_BASE_URL,
    /** Local servers (Ollama, vLLM, llama.cpp) take any key; the SDK insists on one. */
    openaiApiKey: env.OPENAI_API_KEY ?? 'unused',
    openaiModel: env.OPENAI_MODEL ?? '',
    timeoutMs: env.ENGINE_TIMEOUT_MS ?? 30_000,
    historyMessages: env.ENGINE_HISTORY_MESSAGES ?? 20,
  };
});

export type EngineConfig = ReturnType<typeof engineConfig>;
