import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

class KnowledgeEnv {
  /** What an organization's documents may hold together, in bytes of UTF-8 text. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1_024)
  @Max(Number.MAX_SAFE_INTEGER)
  KNOWLEDGE_MAX_BYTES?: number;

  /**
   * What an organization may write in a UTC day, in bytes of text chunked anew (a new document's,
   * the chunks a PATCH does not keep): each is indexed and (with EMBEDDINGS_MODEL) embedded on
   * the operator's key.
   */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1_024)
  @Max(Number.MAX_SAFE_INTEGER)
  KNOWLEDGE_DAILY_BYTES?: number;

  /** How many documents an organization may hold: each costs every search and reply a row. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  KNOWLEDGE_MAX_DOCUMENTS?: number;

  /** Chunks of the personality's documents in each engine call; 0 turns retrieval off. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(0)
  @Max(20)
  KNOWLEDGE_RECALL_LIMIT?: number;
}

/** The business's documents and what replies take of them (docs/knowledge.md). */
export const knowledgeConfig = registerAs('knowledge', () => {
  const env = validateEnv(KnowledgeEnv);
  return {
    maxBytes: env.KNOWLEDGE_MAX_BYTES ?? 104_857_600,
    dailyBytes: env.KNOWLEDGE_DAILY_BYTES ?? 1_073_741_824,
    maxDocuments: env.KNOWLEDGE_MAX_DOCUMENTS ?? 10_000,
    recallLimit: env.KNOWLEDGE_RECALL_LIMIT ?? 4,
  };
});

export type KnowledgeConfig = ReturnType<typeof knowledgeConfig>;
