import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

class EmbeddedPostgresEnv {
  @IsOptional()
  @IsString()
  EMBEDDED_PG_DATA_DIR?: string;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(65_535)
  EMBEDDED_PG_PORT?: number;
}

/**
 * Where the embedded PostgreSQL keeps its data and listens, when DATABASE_URL is unset (main.ts
 * and the CLI start it before the application and its configuration module exist).
 */
export function embeddedPostgresConfig(): { dataDir: string; port: number } {
  const env = validateEnv(EmbeddedPostgresEnv);
  return {
    dataDir: env.EMBEDDED_PG_DATA_DIR ?? '.data/postgres',
    port: env.EMBEDDED_PG_PORT ?? 54329,
  };
}
