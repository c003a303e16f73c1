import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { databaseConfig } from './config/database.config';
import { configLoaders } from './config';
import { CoreModule } from './core.module';
import { buildDataSourceOptions } from './database/data-source-options';
import { startEmbeddedUnlessConfigured } from './database/embedded-postgres';
import { runMigrationsExclusively } from './database/run-migrations';
import { readCatalogFile } from './personalities/catalog-file';
import { PersonalitiesModule } from './personalities/personalities.module';
import { PersonalitiesService } from './personalities/personalities.service';
import type { CatalogEntryFile } from './personalities/entities/personality-definition';

const USAGE = [
  'Usage: node dist/cli.js migrate                    apply pending migrations',
  '       node dist/cli.js catalog import <file.json>',
].join('\n');

/**
 * The server's own core and the feature modules a command needs, as the server builds them; no
 * HTTP server, and in the 'command' role no background job starts and no metrics are served.
 */
@Module({ imports: [CoreModule.forRole('command'), PersonalitiesModule] })
class CliModule {}

function describeImport(entries: CatalogEntryFile[]): string {
  const noun = entries.length === 1 ? 'entry' : 'entries';
  const names = entries.map((entry) => `${entry.slug}@${entry.version}`).join(', ');
  return `Imported ${entries.length} catalog ${noun}: ${names}`;
}

async function main(argv: string[]): Promise<number> {
  if (argv.length === 1 && ['--help', '-h', 'help'].includes(argv[0])) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
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
  const embedded = await startEmbeddedUnlessConfigured();
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

/**
 * Applies pending migrations and exits, for a Kubernetes Job or init container that runs before
 * new pods start with MIGRATE_ON_START=false. Same advisory lock as start-up migrations, so it is
 * safe beside instances that still migrate themselves.
 */
async function migrate(): Promise<number> {
  const embedded = await startEmbeddedUnlessConfigured();
  let dataSource: DataSource | undefined;
  try {
    // The whole configuration, as the pods will read it: a Job that migrates under a ConfigMap
    // the pods then refuse would report success for a release that cannot start.
    for (const load of configLoaders) load();
    dataSource = new DataSource(buildDataSourceOptions({ url: databaseConfig().url }));
    await dataSource.initialize();
    const applied = await runMigrationsExclusively(dataSource, (holder) =>
      process.stdout.write(`Waiting for the migration lock, held by ${holder}\n`),
    );
    process.stdout.write(
      applied.length === 0
        ? 'No pending migrations\n'
        : `Applied ${applied.length} migration(s): ${applied.map((m) => m.name).join(', ')}\n`,
    );
    return 0;
  } finally {
    if (dataSource?.isInitialized) await dataSource.destroy();
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
