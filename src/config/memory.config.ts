import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

class MemoryEnv {
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(0)
  @Max(50)
  MEMORY_RECALL_LIMIT?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(10_000)
  MEMORY_FACTS_LIMIT?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1_000)
  @Max(86_400_000)
  MEMORY_PURGE_INTERVAL_MS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  MEMORY_POSTINGS_TRIM_INTERVAL_MS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1_024)
  @Max(256 * 1_024 * 1_024)
  IMPORT_MAX_BYTES?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(64)
  IMPORTS_IN_FLIGHT?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(10)
  @Max(60_000)
  MEMORY_RECALL_TIMEOUT_MS?: number;
}

/** What a reply remembers beyond its history, and how memories come in and go (docs/memory.md). */
export const memoryConfig = registerAs('memory', () => {
  const env = validateEnv(MemoryEnv);
  return {
    /** Older memories recalled into each engine call; 0 turns recall off. */
    recallLimit: env.MEMORY_RECALL_LIMIT ?? 8,
    /** Database time recall may take per reply; past it the reply goes on without (§29). */
    recallTimeoutMs: env.MEMORY_RECALL_TIMEOUT_MS ?? 150,
    factsLimit: env.MEMORY_FACTS_LIMIT ?? 200,
    purgeIntervalMs: env.MEMORY_PURGE_INTERVAL_MS ?? 3_600_000,
    /** How often each instance trims the postings replies at once left past 64 (docs/memory.md). */
    postingsTrimIntervalMs: env.MEMORY_POSTINGS_TRIM_INTERVAL_MS ?? 1_000,
    importMaxBytes: env.IMPORT_MAX_BYTES ?? 16 * 1_024 * 1_024,
    /** PMF imports one instance runs at once (each holds up to IMPORT_MAX_BYTES in /tmp). */
    importsInFlight: env.IMPORTS_IN_FLIGHT ?? 2,
  };
});

export type MemoryConfig = ReturnType<typeof memoryConfig>;
