import { Module } from '@nestjs/common';
import { join } from 'node:path';
import { ConsoleController } from './console.controller';
import { ConsoleFiles } from './console-files';

/**
 * Where `npm run build` writes the console: dist/web, beside the compiled server (dist/console/
 * holds this module); when the server runs from its sources (the e2e suite), the last build's.
 */
export function consoleDirectory(): string {
  return __filename.endsWith('.ts')
    ? join(__dirname, '..', '..', 'dist', 'web')
    : join(__dirname, '..', 'web');
}

/** Serves the web console (contract §28) from the files built with the service. */
@Module({
  controllers: [ConsoleController],
  providers: [{ provide: ConsoleFiles, useFactory: () => new ConsoleFiles(consoleDirectory()) }],
})
// Its security headers are set ahead of every other middleware: app.setup.ts.
export class ConsoleModule {}
