import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsInt, IsNumber, IsOptional, IsString, IsUrl, Max, MaxLength, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

class EmbeddingsEnv {
  /** Unset: recall by meaning is off, and nothing is embedded, stored or read. */
  @IsOptional()
  @IsString()
  @MaxLength(200)
  EMBEDDINGS_MODEL?: string;

  @IsOptional()
  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  EMBEDDINGS_BASE_URL?: string;

  @IsOptional()
  @IsString()
  EMBEDDINGS_API_KEY?: string;

  /** Sent as `dimensions` (text-embedding-3 models shorten their vectors): cheaper to compare. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(4_096)
  EMBEDDINGS_DIMENSIONS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(2_048)
  EMBEDDINGS_BATCH_SIZE?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(10)
  @Max(3_600_000)
  EMBEDDINGS_POLL_INTERVAL_MS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(10)
  @Max(10_000)
  EMBEDDINGS_QUERY_TIMEOUT_MS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(100_000)
  EMBEDDINGS_CANDIDATES?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsNumber()
  @Min(-1)
  @Max(1)
  EMBEDDINGS_MIN_SIMILARITY?: number;
}

/** Recall by meaning (contract §27; docs/memory.md, "Recall by meaning"). */
export const embeddingsConfig = registerAs('embeddings', () => {
  const env = validateEnv(EmbeddingsEnv);
  return {
    /** null: off. */
    model: env.EMBEDDINGS_MODEL || null,
    /** undefined: OPENAI_BASE_URL's (the Embedder reads it from the engine's config). */
    baseUrl: env.EMBEDDINGS_BASE_URL,
    /** undefined: OPENAI_API_KEY's. */
    apiKey: env.EMBEDDINGS_API_KEY,
    /** undefined: the model's own. */
    dimensions: env.EMBEDDINGS_DIMENSIONS,
    /** Texts sent per provider call by the background worker. */
    batchSize: env.EMBEDDINGS_BATCH_SIZE ?? 64,
    /** The worker's pause between runs; after a provider failure it backs off from this. */
    pollIntervalMs: env.EMBEDDINGS_POLL_INTERVAL_MS ?? 1_000,
    /** How long search and recall wait for the question's embedding before going lexical. */
    queryTimeoutMs: env.EMBEDDINGS_QUERY_TIMEOUT_MS ?? 300,
    /** The latest embedded memories of the end user (chunks of the organization) compared by sketch. */
    candidates: env.EMBEDDINGS_CANDIDATES ?? 5_000,
    /** Below this cosine a memory is not in the embedding ranking: unrelated is not "nearest". */
    minSimilarity: env.EMBEDDINGS_MIN_SIMILARITY ?? 0.3,
  };
});

export type EmbeddingsConfig = ReturnType<typeof embeddingsConfig>;
