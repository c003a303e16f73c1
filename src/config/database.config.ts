import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsBoolean, IsInt, IsOptional, Matches, Max, Min } from 'class-validator';
import { toBoolean, toNumber, validateEnv } from './validate-env';

class DatabaseEnv {
  // main.ts starts the embedded PostgreSQL and sets this before the app reads it.
  @Matches(/^postgres(ql)?:\/\//, { message: 'DATABASE_URL must be a postgres:// URL' })
  DATABASE_URL: string;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(200)
  DATABASE_POOL_SIZE?: number;

  // false when a Kubernetes Job (or init container) runs `node dist/cli.js migrate` instead.
  @IsOptional()
  @Transform(toBoolean)
  @IsBoolean()
  MIGRATE_ON_START?: boolean;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  DATABASE_STATEMENT_TIMEOUT_MS?: number;
}

export const databaseConfig = registerAs('database', () => {
  const env = validateEnv(DatabaseEnv);
  return {
    url: env.DATABASE_URL,
    poolSize: env.DATABASE_POOL_SIZE ?? 10,
    migrateOnStart: env.MIGRATE_ON_START ?? true,
    /** The longest one statement of a request may run; past it 503 database_timeout. */
    statementTimeoutMs: env.DATABASE_STATEMENT_TIMEOUT_MS ?? 5_000,
  };
});

export type DatabaseConfig = ReturnType<typeof databaseConfig>;
