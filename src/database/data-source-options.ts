import { join } from 'node:path';
import type { DataSourceOptions } from 'typeorm';
import { DatabaseClient } from './database-client';

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
 * How much longer than its statement timeout the client waits for a statement's answer before it
 * gives the session up. PostgreSQL ends a statement past statement_timeout itself; this is for a
 * server, or a path to it, gone silent, where nothing ends it (found by review: requests, the
 * webhook loop and the erasure worker waited without limit, holding their sessions).
 */
export const READ_TIMEOUT_MARGIN_MS = 2_000;

/** The client's wait for a statement's answer under `statementTimeoutMs` (0: none, no limit). */
export function readTimeoutFor(statementTimeoutMs: number): number {
  return statementTimeoutMs === 0 ? 0 : statementTimeoutMs + READ_TIMEOUT_MARGIN_MS;
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
      // Ends a session whose statement went unanswered past query_timeout (database-client.ts).
      Client: DatabaseClient,
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
      ...(settings.statementTimeoutMs
        ? {
            statement_timeout: settings.statementTimeoutMs,
            // pg's own timer: past it the statement fails and its session is destroyed.
            query_timeout: readTimeoutFor(settings.statementTimeoutMs),
          }
        : {}),
      options: sessionOptions(),
    },
  };
}
