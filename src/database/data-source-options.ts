import { join } from 'node:path';
import type { DataSourceOptions } from 'typeorm';

export interface DatabaseConnectionSettings {
  url: string;
  poolSize?: number;
  /**
   * The longest a statement may run (DATABASE_STATEMENT_TIMEOUT_MS), for the app's requests;
   * none for migrations and the TypeORM CLI.
   */
  statementTimeoutMs?: number;
}

/**
 * The `options` start-up parameter of every session: no JIT compilation. PostgreSQL compiles a
 * statement whose estimated cost passes jit_above_cost (100,000 by default) at each execution:
 * knowledge retrieval's estimate sits near it once its tables are vacuumed and analysed, and when
 * it crossed, compiling took 43.6 ms of a 54.5 ms execution that takes 8 ms without. The
 * service's statements are short; none gains from it (docs/database.md, "Sessions"). Settings an
 * operator gives in PGOPTIONS come first, as pg would have sent them alone.
 */
export function sessionOptions(...more: string[]): string {
  return [process.env.PGOPTIONS, '-c jit=off', ...more].filter(Boolean).join(' ');
}

/**
 * The one source of TypeORM options, used by the app (TypeOrmModule) and by the TypeORM CLI
 * (ormconfig.ts). The schema is migrations only.
 */
export function buildDataSourceOptions(settings: DatabaseConnectionSettings): DataSourceOptions {
  return {
    type: 'postgres',
    url: settings.url,
    entities: [join(__dirname, '..', '**', '*.entity.{ts,js}')],
    migrations: [join(__dirname, 'migrations', '*.{ts,js}')],
    migrationsTableName: 'typeorm_migrations',
    // The app runs them itself under an advisory lock (see database.module.ts).
    migrationsRun: false,
    synchronize: false,
    logging: ['error', 'warn', 'migration'],
    extra: {
      max: settings.poolSize ?? 10,
      // Fail fast when the database is unreachable, so readiness reports it instead of hanging.
      connectionTimeoutMillis: 5_000,
      idleTimeoutMillis: 30_000,
      // A pooled session whose peer went silently (a load balancer or NAT dropping it, a host
      // gone) is found dead by TCP keepalive, not by the next request that takes it.
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      application_name: 'personality-api',
      // Sent at connection start-up, so it holds for every statement on the pool.
      ...(settings.statementTimeoutMs ? { statement_timeout: settings.statementTimeoutMs } : {}),
      options: sessionOptions(),
    },
  };
}
