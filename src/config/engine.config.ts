import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, IsUrl, Max, MaxLength, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

export const ENGINES = ['local', 'openai'] as const;
export type EngineName = (typeof ENGINES)[number];

/** More would only lengthen a failing reply: each one is tried within ENGINE_TIMEOUT_MS. */
export const FALLBACKS_MAX = 8;
const MODEL_MAX_LENGTH = 200;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

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
  @MaxLength(MODEL_MAX_LENGTH)
  OPENAI_MODEL?: string;

  @IsOptional()
  @IsString()
  OPENAI_FALLBACKS?: string;

  /** The models a personality may name, comma-separated (default: OPENAI_MODEL and the fallbacks'). */
  @IsOptional()
  @IsString()
  OPENAI_ALLOWED_MODELS?: string;

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

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(0)
  @Max(5)
  ENGINE_RETRIES?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(1000)
  ENGINE_BREAKER_FAILURES?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  ENGINE_BREAKER_COOLDOWN_MS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  ENGINE_MAX_TOKENS?: number;
}

/** A provider and model to turn to when the ones before it fail (OPENAI_FALLBACKS). */
export interface EngineFallback {
  model: string;
  /** undefined: the SDK's default (api.openai.com), as for OPENAI_BASE_URL. */
  baseUrl: string | undefined;
  apiKey: string;
}

const invalid = (problems: string[]) =>
  new Error(`Invalid configuration:\n  ${problems.join('\n  ')}`);

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

/**
 * OPENAI_FALLBACKS: a JSON array of `{model, base_url?, api_key_env?}`. Every problem is named
 * with its path (`OPENAI_FALLBACKS[1].base_url`), and a key variable must be set now: a fallback
 * whose key is missing would only be found out when the primary is already failing.
 */
export function parseFallbacks(
  raw: string | undefined,
  defaults: { baseUrl: string | undefined; apiKey: string },
  env: NodeJS.ProcessEnv = process.env,
): EngineFallback[] {
  if (raw === undefined || raw.trim() === '') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw invalid([`OPENAI_FALLBACKS: is not JSON (${(error as Error).message})`]);
  }
  const shape = 'must be a JSON array of {"model", "base_url"?, "api_key_env"?}';
  if (!Array.isArray(parsed)) throw invalid([`OPENAI_FALLBACKS: ${shape}`]);
  if (parsed.length > FALLBACKS_MAX) {
    throw invalid([`OPENAI_FALLBACKS: at most ${FALLBACKS_MAX} fallbacks`]);
  }
  const problems: string[] = [];
  const fallbacks = parsed.map((entry: unknown, index): EngineFallback => {
    const at = `OPENAI_FALLBACKS[${index}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      problems.push(`${at}: ${shape}`);
      return { model: '', baseUrl: undefined, apiKey: '' };
    }
    const { model, base_url, api_key_env, ...unknown } = entry as Record<string, unknown>;
    for (const field of Object.keys(unknown)) problems.push(`${at}.${field}: unknown field`);
    if (typeof model !== 'string' || model.trim() === '' || model.length > MODEL_MAX_LENGTH) {
      problems.push(`${at}.model: required, a model name of 1..${MODEL_MAX_LENGTH} characters`);
    }
    if (base_url !== undefined && (typeof base_url !== 'string' || !isHttpUrl(base_url))) {
      problems.push(`${at}.base_url: must be an http:// or https:// URL`);
    }
    let apiKey = defaults.apiKey;
    if (api_key_env !== undefined) {
      if (typeof api_key_env !== 'string' || !ENV_NAME.test(api_key_env)) {
        problems.push(`${at}.api_key_env: must be the name of an environment variable`);
      } else if (!env[api_key_env]) {
        problems.push(`${at}.api_key_env: ${api_key_env} is not set`);
      } else {
        apiKey = env[api_key_env];
      }
    }
    return {
      model: typeof model === 'string' ? model : '',
      baseUrl: typeof base_url === 'string' ? base_url : defaults.baseUrl,
      apiKey,
    };
  });
  if (problems.length > 0) throw invalid(problems);
  return fallbacks;
}

/**
 * OPENAI_ALLOWED_MODELS: the models a personality's `model` may name (contract §25), so that a
 * tenant cannot send the provider's bill to a model the operator never chose. Unset: OPENAI_MODEL
 * and the fallbacks' models, the ones the operator configured. With the local engine and
 * neither set, the list is empty: the local engine uses no model, and a personality may then
 * name none (only `null`), which also keeps a later switch to a provider from inheriting names
 * nobody vetted.
 */
export function allowedModels(
  raw: string | undefined,
  configured: { model: string; fallbacks: EngineFallback[] },
): string[] {
  if (raw !== undefined && raw.trim() !== '') {
    const names = raw.split(',').map((name) => name.trim());
    const bad = names.filter((name) => name === '' || name.length > MODEL_MAX_LENGTH);
    if (bad.length > 0) {
      throw invalid([
        `OPENAI_ALLOWED_MODELS: model names of 1..${MODEL_MAX_LENGTH} characters, comma-separated`,
      ]);
    }
    return [...new Set(names)];
  }
  return [
    ...new Set(
      [configured.model, ...configured.fallbacks.map((fallback) => fallback.model)].filter(
        (name) => name !== '',
      ),
    ),
  ];
}

/** Which engine writes replies, and how the OpenAI-compatible one reaches its providers. */
export const engineConfig = registerAs('engine', () => {
  const env = validateEnv(EngineEnv);
  const engine = env.RESPONSE_ENGINE ?? 'local';
  if (engine === 'openai' && !env.OPENAI_MODEL) {
    throw invalid(['OPENAI_MODEL: required when RESPONSE_ENGINE=openai (the default model)']);
  }
  /** undefined: the SDK's default (api.openai.com). */
  const openaiBaseUrl = env.OPENAI_BASE_URL;
  /** Local servers (Ollama, vLLM, llama.cpp) take any key; the SDK insists on one. */
  const openaiApiKey = env.OPENAI_API_KEY ?? 'unused';
  return {
    engine,
    openaiBaseUrl,
    openaiApiKey,
    openaiModel: env.OPENAI_MODEL ?? '',
    fallbacks: parseFallbacks(env.OPENAI_FALLBACKS, {
      baseUrl: openaiBaseUrl,
      apiKey: openaiApiKey,
    }),
    timeoutMs: env.ENGINE_TIMEOUT_MS ?? 30_000,
    historyMessages: env.ENGINE_HISTORY_MESSAGES ?? 20,
    retries: env.ENGINE_RETRIES ?? 1,
    breakerFailures: env.ENGINE_BREAKER_FAILURES ?? 5,
    breakerCooldownMs: env.ENGINE_BREAKER_COOLDOWN_MS ?? 30_000,
    maxTokens: env.ENGINE_MAX_TOKENS ?? 1024,
  };
});

export type EngineConfig = ReturnType<typeof engineConfig>;

/**
 * The models a personality may name (contract §25), a concern of its own so that the engine's
 * options stay as the routing layer takes them: OPENAI_ALLOWED_MODELS, else the engine's
 * configured models.
 */
export const modelsConfig = registerAs('models', () => {
  const env = validateEnv(EngineEnv);
  const engine = engineConfig();
  return {
    allowed: allowedModels(env.OPENAI_ALLOWED_MODELS, {
      model: engine.openaiModel,
      fallbacks: engine.fallbacks,
    }),
  };
});
