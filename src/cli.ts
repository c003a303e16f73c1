import { Module } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { LoggingModule } from './common/logging/logging.module';
import { configLoaders } from './config';
import { DatabaseModule } from './database/database.module';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from './database/embedded-postgres';
import { Organization } from './organizations/entities/organization.entity';
import { readCatalogFile } from './personalities/catalog-file';
import { PersonalitiesModule } from './personalities/personalities.module';
import { PersonalitiesService } from './personalities/personalities.service';
import { describeImport } from './personalities/catalog-cli';

const USAGE = 'Usage: npm run cli -- catalog import <file.json>';

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
  let embedded: EmbeddedPostgresHandle | undefined;
  if (!process.env.DATABASE_URL) {
    // The same embedded database main.ts uses when DATABASE_URL is unset.
    embedded = await startEmbeddedPostgres({
      dataDir: process.env.EMBEDDED_PG_DATA_DIR ?? '.data/postgres',
      port: Number(process.env.EMBEDDED_PG_PORT ?? 54329),
    });
    process.env.DATABASE_URL = embedded.url;
  }
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

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
