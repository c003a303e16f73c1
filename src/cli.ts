import { Module } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { LoggingModule } from './common/logging/logging.module';
import { configLoaders } from './config';
import { databaseConfig } from './config/database.config';
import { buildDataSourceOptions } from './database/data-source-options';
import { DatabaseModule } from './database/database.module';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from './database/embedded-postgres';
import { runMigrationsExclusively } from './database/run-migrations';
import { Organization } from './organizations/entities/organization.entity';
import { readCatalogFile } from './personalities/catalog-file';
import { PersonalitiesModule } from './personalities/personalities.module';
import { PersonalitiesService } from './personalities/personalities.service';
import { describeImport } from './personalities/catalog-cli';

const USAGE = [
  'Usage: node dist/cli.js migrate                    apply pending migrations',
  '       node dist/cli.js catalog import <file.json>',
].join('\n');

/** Only what the commands need: no HTTP server, no workers. */
@Module({
  imports: [
    ConfigModule.forRoot({ isGlobal: true, cache: true, load: configLoaders, ignoreEnvFile: true }),
    LoggingModule,
    DatabaseModule,
    // Personalities refer to organizations; the entity is needed, not the module.
    TypeOrmModule.forFeature([Organization]),
    PersonalitiesModule,
  ],
})
class CliModule {}

async function main(argv: string[]): Promise<number> {
  if (argv.length === 1 && argv[0] === 'migrate') return migrate();
  const [group, command, path, ...rest] = argv;
  if (group !== 'catalog' || command !== 'import' || !path || rest.length > 0) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  let entries;
  try {
    // A bad file is refused before anything connects to the database.
    entries = readCatalogFile(path);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return 1;
  }
  const embedded = await embeddedUnlessConfigured();
  const app = await NestFactory.createApplicationContext(CliModule, { logger: ['error'] });
  try {
    await app.get(PersonalitiesService).importCatalog(entries);
    process.stdout.write(`${describeImport(entries)}\n`);
    return 0;
  } finally {
    await app.close();
    await embedded?.stop();
  }
}

/** The same embedded database main.ts uses when DATABASE_URL is unset. */
async function embeddedUnlessConfigured(): Promise<EmbeddedPostgresHandle | undefined> {
  if (process.env.DATABASE_URL) return undefined;
  const embedded = await startEmbeddedPostgres({
    dataDir: process.env.EMBEDDED_PG_DATA_DIR ?? '.data/postgres',
    port: Number(process.env.EMBEDDED_PG_PORT ?? 54329),
  });
  process.env.DATABASE_URL = embedded.url;
  return embedded;
}

/**
 * Applies pending migrations and exits, for a Kubernetes Job or init container that runs before
 * new pods start with MIGRATE_ON_START=false. Same advisory lock as start-up migrations, so it is
 * safe beside instances that still migrate themselves.
 */
async function migrate(): Promise<number> {
  const embedded = await embeddedUnlessConfigured();
  const dataSource = new DataSource(buildDataSourceOptions(databaseConfig()));
  try {
    await dataSource.initialize();
    const applied = await runMigrationsExclusively(dataSource);
    process.stdout.write(
      applied.length === 0
        ? 'No pending migrations\n'
        : `Applied ${applied.length} migration(s): ${applied.map((m) => m.name).join(', ')}\n`,
    );
    return 0;
  } finally {
    if (dataSource.isInitialized) await dataSource.destroy();
    await embedded?.stop();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
