import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { ROOT_LOGGER } from '../common/logging/root-logger';
import { databaseConfig, type DatabaseConfig } from '../config/database.config';
import { buildDataSourceOptions } from './data-source-options';
import { Database } from './database';
import { pendingMigrations, runMigrationsExclusively } from './run-migrations';
import { TypeOrmPinoLogger } from './typeorm-pino-logger';

/** The connection, its migrations, and `Database`, the one way repositories reach it. */
@Global()
@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      inject: [databaseConfig.KEY, ROOT_LOGGER],
      useFactory: (database: DatabaseConfig, logger: Logger) => ({
        ...buildDataSourceOptions(database),
        logger: new TypeOrmPinoLogger(logger),
        // Pool errors (a dropped connection) are expected while the database is away; the pool
        // reconnects and readiness reports it.
        logging: ['error', 'warn', 'migration'],
        // Every entity of src/ (the glob of buildDataSourceOptions, as the TypeORM CLI loads
        // them): the schema is one, and a foreign key names its table, not another module's class.
        // Fail start-up at once with the real error instead of retrying for half a minute.
        retryAttempts: 0,
      }),
      dataSourceFactory: async (options) => {
        // The factory gets no injection; the validated value is the same as ConfigService's.
        // MIGRATE_ON_START=false: `node dist/cli.js migrate` (a Kubernetes Job) runs them first.
        if (databaseConfig().migrateOnStart) {
          // On connections of their own, without the requests' statement timeout: a migration
          // copying a large table may take minutes.
          const extra: Record<string, unknown> = { ...(options!.extra as object) };
          extra.max = 2; // the advisory lock's session, and the migrations'
          delete extra.statement_timeout;
          delete extra.query_timeout;
          const migrator = new DataSource({ ...options!, extra });
          await migrator.initialize();
          try {
            const started = performance.now();
            const applied = await runMigrationsExclusively(migrator, (holder) =>
              (options!.logger as TypeOrmPinoLogger).logMigration(
                `Waiting for the migration lock, held by ${holder}`,
              ),
            );
            // TypeORM logs each migration at its schema-build level (debug): without this line an
            // operator could not tell which instance migrated, what or for how long (review).
            (options!.logger as TypeOrmPinoLogger).logMigration(
              applied.length === 0
                ? 'No pending migrations'
                : `Applied ${applied.length} migration(s) in ${Math.round(performance.now() - started)} ms: ${applied.map((m) => m.name).join(', ')}`,
            );
          } finally {
            await migrator.destroy();
          }
        }
        const dataSource = await new DataSource(options!).initialize();
        // Started before the migrations' Job finished (or without one): refused with the reason,
        // where it would have been ready and answered 500 on every table the release changed
        // (found by review). Migrations of a newer release are no reason: they only add.
        const pending = databaseConfig().migrateOnStart ? [] : await pendingMigrations(dataSource);
        if (pending.length > 0) {
          await dataSource.destroy();
          throw new Error(
            `The database has ${pending.length} migration(s) of this release still to apply (${pending.at(-1)} the last), and MIGRATE_ON_START=false: run \`node dist/cli.js migrate\` (the migrations Job) first`,
          );
        }
        return dataSource;
      },
    }),
  ],
  providers: [Database],
  exports: [Database],
})
export class DatabaseModule {}
