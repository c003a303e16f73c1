import { Controller, Get, Module, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { resolve } from 'node:path';

/**
 * The BUILT service (dist/AppModule, set up as main.ts does) plus one twin controller: the same
 * handler, returning the real emotion changelog, mounted once @Public() and once @Scopes('read').
 * The difference between the two is what authentication costs, and nothing else.
 * Usage: auth-twin-server <port>; DATABASE_URL and the rest come from the environment.
 */
const dist = resolve(__dirname, '../../dist');
/* eslint-disable @typescript-eslint/no-require-imports -- the built output, loaded at run time */
const { AppModule } = require(`${dist}/app.module`) as { AppModule: Type };
const { setupApp } = require(`${dist}/app.setup`) as {
  setupApp: (app: NestExpressApplication) => void;
};
const { Public, Scopes } = require(`${dist}/common/auth/auth.decorators`) as {
  Public: () => MethodDecorator;
  Scopes: (scope: string) => MethodDecorator;
};
const { VocabulariesService } = require(`${dist}/vocabularies/vocabularies.service`) as {
  VocabulariesService: Type<{ listChangelog(limit: number): unknown }>;
};
/* eslint-enable @typescript-eslint/no-require-imports */

let vocabularies: { listChangelog(limit: number): unknown };

@Controller('bench/twin')
class AuthTwinController {
  @Public()
  @Get('public')
  open(): unknown {
    return vocabularies.listChangelog(20);
  }

  @Scopes('read')
  @Get('authenticated')
  guarded(): unknown {
    return vocabularies.listChangelog(20);
  }
}

@Module({ imports: [AppModule], controllers: [AuthTwinController] })
class AuthTwinModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create<NestExpressApplication>(AuthTwinModule, {
    bodyParser: false,
    logger: false,
  });
  setupApp(app);
  vocabularies = app.get(VocabulariesService, { strict: false });
  await app.listen(Number(process.argv[2]), '127.0.0.1');
  process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
}

void main();
